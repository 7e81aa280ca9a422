package specs

// Issue 17, acceptance 1 and the refusals: one broker whose only listeners
// are SASL_SSL and SSL (mTLS required; brokers reach each other over
// SASL_SSL as a broker user) serves a user created offline by kaasctl
// users set and one created by AlterUserScramCredentials, over PLAIN,
// SCRAM-SHA-256 and SCRAM-SHA-512, and OAUTHBEARER tokens; it refuses what
// Kafka refuses, each with Kafka's error, and serves other clients
// afterwards; its certificate rotates under load. A second broker of the
// cluster adds a PLAINTEXT listener, for the TLS client that dials it.

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kaas-dev/kaas/wire/tlsfiles/tlstest"
)

var _ = Describe("secure listeners", Label("security"), Ordered, func() {
	const (
		ctlUser, ctlPassword     = "ctl-user", "ctl-password-1"
		brokerUser               = "kaas-broker"
		adminUser, adminPassword = "api-user", "api-password-2"
		issuer, audience         = "https://issuer.kaas.test", "kaas"
	)
	var (
		ctx               context.Context
		b                 *Broker
		ca, rogue         tlstest.CA
		saslAddr, sslAddr string
		certFile, keyFile string
		trustCA, mtls     *tls.Config
		tokens            tokenIssuer
		scram512          func(user, pass string) sasl.Mechanism
		brokerUnaffected  func()
		mechanisms        map[string]func(user, pass string) sasl.Mechanism
		adm               *kadm.Client
		brokerArgs        func(plainAddr, saslAddr, sslAddr string) []string
	)

	BeforeAll(func() {
		ctx = context.Background()
		data, tlsDir := GinkgoT().TempDir(), GinkgoT().TempDir()
		ca, rogue = tlstest.NewCA(GinkgoTB(), "kaas-specs-root"), tlstest.NewCA(GinkgoTB(), "kaas-specs-rogue")
		var caFile string
		certFile, keyFile, caFile = ca.ServerFiles(GinkgoTB(), tlsDir)
		trustCA = &tls.Config{RootCAs: ca.Pool()}
		mtls = &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{ca.Pair(GinkgoTB(), pkix.Name{CommonName: "app"})}}
		tokens = newTokenIssuer("key-1", issuer, audience)
		jwks := filepath.Join(tlsDir, "jwks.json")
		tokens.writeJWKS(jwks)

		By("creating " + ctlUser + " offline with kaasctl users set, for both SCRAM mechanisms")
		pwFile := filepath.Join(tlsDir, "password")
		Expect(os.WriteFile(pwFile, []byte(ctlPassword+"\n"), 0o600)).To(Succeed())
		for _, m := range []string{"SCRAM-SHA-512", "SCRAM-SHA-256"} {
			out, err := Kaasctl(ctx, "users", "set", ctlUser, "--mechanism", m, "--password-file", pwFile, "--data", data)
			Expect(err).NotTo(HaveOccurred())
			Expect(out).To(ContainSubstring(m))
		}
		By("creating the brokers' own user, " + brokerUser + ", the same way")
		brokerPwFile := filepath.Join(tlsDir, "broker-password")
		Expect(os.WriteFile(brokerPwFile, []byte("broker-password-0\n"), 0o600)).To(Succeed())
		_, err := Kaasctl(ctx, "users", "set", brokerUser, "--mechanism", "SCRAM-SHA-512", "--password-file", brokerPwFile, "--data", data)
		Expect(err).NotTo(HaveOccurred())

		saslAddr, sslAddr = freeAddr(), freeAddr()
		// plainAddr, when not empty, adds a PLAINTEXT listener. The admin
		// address serves pprof for the goroutine count of the flood below.
		brokerArgs = func(plainAddr, saslAddr, sslAddr string) []string {
			ls := "SASL_SSL://" + saslAddr + ",SSL://" + sslAddr
			if plainAddr != "" {
				ls += ",PLAINTEXT://" + plainAddr
			}
			return []string{
				"--listeners", ls, "--admin-pprof",
				"--inter-broker-listener", "SASL_SSL", "--inter-broker-username", brokerUser,
				"--inter-broker-password-file", brokerPwFile,
				"--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-client-ca-file", caFile,
				"--tls-client-auth", "required",
				"--sasl-mechanisms", "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
				"--oauth-jwks-file", jwks, "--oauth-issuer", issuer, "--oauth-audience", audience}
		}
		b = StartBroker(data, func(b *Broker) {
			b.ExtraArgs = append(b.ExtraArgs, brokerArgs("", saslAddr, sslAddr)...)
		})

		scram512 = func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha512Mechanism() }
		mechanisms = map[string]func(user, pass string) sasl.Mechanism{
			"PLAIN":         func(u, p string) sasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() },
			"SCRAM-SHA-256": func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha256Mechanism() },
			"SCRAM-SHA-512": scram512,
		}
		adm = kadm.NewClient(newSecureClient(saslAddr, trustCA, kgo.SASL(scram512(ctlUser, ctlPassword))))
		brokerUnaffected = func() {
			GinkgoHelper()
			By("checking another client still produces and consumes")
			roundTrip(ctx, saslAddr, trustCA, kgo.SASL(scram512(ctlUser, ctlPassword)))
			roundTrip(ctx, sslAddr, mtls)
		}
	})

	It("serves a user from kaasctl users set and one from AlterUserScramCredentials over PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", func() {
		By("creating " + adminUser + " with AlterUserScramCredentials, one mechanism a request as Kafka requires")
		for _, m := range []kadm.ScramMechanism{kadm.ScramSha512, kadm.ScramSha256} {
			altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: adminUser, Mechanism: m, Iterations: 8192, Password: adminPassword}})
			Expect(err).NotTo(HaveOccurred())
			Expect(altered[adminUser].Err).NotTo(HaveOccurred(), "%s: %s", m, altered[adminUser].ErrMessage)
		}
		described, err := adm.DescribeUserSCRAMs(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(described).To(HaveLen(3))
		Expect(described[brokerUser].CredInfos).To(HaveLen(1), "the broker user's credentials")
		for _, u := range []string{ctlUser, adminUser} {
			Expect(described[u].Err).NotTo(HaveOccurred())
			Expect(described[u].CredInfos).To(HaveLen(2), "%s's credentials", u)
		}
		out, err := Kaasctl(ctx, "users", "list", "--data", b.Dir)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring(adminUser), "kaasctl users list sees what the API wrote")

		for _, u := range []struct{ user, password string }{{ctlUser, ctlPassword}, {adminUser, adminPassword}} {
			for name, mech := range mechanisms {
				By("producing and consuming as " + u.user + " over SASL_SSL with " + name)
				roundTrip(ctx, saslAddr, trustCA, kgo.SASL(mech(u.user, u.password)))
			}
		}
		By("producing and consuming over SSL with a client certificate from the trusted CA")
		roundTrip(ctx, sslAddr, mtls)
	})

	It("refuses a wrong password and an unknown user with the same SASL_AUTHENTICATION_FAILED message", func() {
		for name, mech := range mechanisms {
			wrong := newSecureClient(saslAddr, trustCA, kgo.SASL(mech(ctlUser, "not-"+ctlPassword)))
			werr := wrong.Ping(ctx)
			Expect(errors.Is(werr, kerr.SaslAuthenticationFailed)).To(BeTrue(), "%s, wrong password: %v", name, werr)
			unknown := newSecureClient(saslAddr, trustCA, kgo.SASL(mech("nobody-"+ctlUser, ctlPassword)))
			uerr := unknown.Ping(ctx)
			Expect(errors.Is(uerr, kerr.SaslAuthenticationFailed)).To(BeTrue(), "%s, unknown user: %v", name, uerr)
			Expect(uerr.Error()).To(Equal(werr.Error()), "%s: an unknown user must read as a wrong password", name)
		}
		brokerUnaffected()
	})

	It("refuses a client certificate from another CA, and none, on the SSL listener", func() {
		for what, tc := range map[string]*tls.Config{
			"a certificate from another CA": {RootCAs: ca.Pool(), Certificates: []tls.Certificate{rogue.Pair(GinkgoTB(), pkix.Name{CommonName: "mallory"})}},
			"no certificate":                trustCA,
		} {
			cl := newSecureClient(sslAddr, tc)
			err := cl.Ping(ctx)
			Expect(err).To(HaveOccurred(), what)
			Expect(err.Error()).To(MatchRegexp(`tls: (bad certificate|unknown certificate authority|certificate required)`), what)
		}
		brokerUnaffected()
	})

	It("closes a plaintext client on a TLS listener", func() {
		for _, addr := range []string{saslAddr, sslAddr} {
			By("sending ApiVersions in plaintext to the TLS listener " + addr)
			c, err := dialRaw(addr, nil)
			Expect(err).NotTo(HaveOccurred())
			req := kmsgApiVersions()
			Expect(c.send(req)).To(Succeed())
			_, err = c.read(req, 10*time.Second)
			Expect(err).To(HaveOccurred(), "a TLS listener answered plaintext")
			Expect(c.waitClosed(10*time.Second)).To(BeTrue(), "connection left open")
			c.close()
		}
		brokerUnaffected()
	})

	It("closes a connection that sends a 10 MiB frame before authenticating", func() {
		c, err := dialRaw(saslAddr, trustCA)
		Expect(err).NotTo(HaveOccurred())
		defer c.close()
		frame := make([]byte, 4+64<<10)
		binary.BigEndian.PutUint32(frame, 10<<20)
		_ = c.write(frame) // the broker may close before it is all written
		Expect(c.waitClosed(10*time.Second)).To(BeTrue(), "a 10 MiB frame before authentication was not refused")
		brokerUnaffected()
	})

	It("stays bounded under a flood of 200 concurrent failed logins", func() {
		before := resourceUse(b)
		const flood = 200
		codes := make([]int16, flood)
		errs := make([]error, flood)
		var wg sync.WaitGroup
		for i := range flood {
			wg.Go(func() { codes[i], errs[i] = badPlainLogin(saslAddr, trustCA, ctlUser) })
		}
		wg.Wait()
		for i := range flood {
			Expect(errs[i]).NotTo(HaveOccurred(), "login %d", i)
			Expect(codes[i]).To(Equal(kerr.SaslAuthenticationFailed.Code), "login %d", i)
		}
		var after brokerUse
		Eventually(func(g Gomega) {
			after = resourceUse(b)
			g.Expect(after.goroutines).To(BeNumerically("<=", before.goroutines+20), "goroutines %s, before %s", after, before)
		}).WithTimeout(20 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
		Expect(after.rssKiB).To(BeNumerically("<", before.rssKiB+64<<10), "RSS %s, before %s", after, before)
		AddReportEntry("failed-login flood", "before "+before.String()+"; after "+after.String())
		brokerUnaffected()
	})

	It("accepts a good OAUTHBEARER token and refuses an expired or badly signed one", func() {
		good := tokens.token("oauth-app", time.Now().Add(time.Hour))
		By("producing and consuming with a good token")
		roundTrip(ctx, saslAddr, trustCA, kgo.SASL(oauth.Auth{Token: good}.AsMechanism()))
		forger := newTokenIssuer("key-1", issuer, audience)
		for what, tok := range map[string]string{
			"an expired token":      tokens.token("oauth-app", time.Now().Add(-10*time.Minute)),
			"a badly signed token":  forger.token("oauth-app", time.Now().Add(time.Hour)),
			"a token for elsewhere": tokenIssuer{key: tokens.key, kid: tokens.kid, issuer: issuer, audience: "elsewhere"}.token("oauth-app", time.Now().Add(time.Hour)),
		} {
			cl := newSecureClient(saslAddr, trustCA, kgo.SASL(oauth.Auth{Token: tok}.AsMechanism()))
			err := cl.Ping(ctx)
			Expect(errors.Is(err, kerr.SaslAuthenticationFailed)).To(BeTrue(), "%s: %v", what, err)
		}
		brokerUnaffected()
	})

	It("rotates its certificate under load with no client error", func() {
		oldSerial, err := servedSerial(saslAddr, trustCA)
		Expect(err).NotTo(HaveOccurred())
		topic := UniqueName("rotate")
		cl := newSecureClient(saslAddr, trustCA, kgo.SASL(scram512(ctlUser, ctlPassword)),
			kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation())
		var acked, failed atomic.Int64
		var firstErr atomic.Value
		pctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			for pctx.Err() == nil {
				if err := cl.ProduceSync(pctx, &kgo.Record{Value: []byte("load")}).FirstErr(); err != nil {
					if pctx.Err() == nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
					continue
				}
				acked.Add(1)
			}
		}()
		Eventually(acked.Load).WithTimeout(20 * time.Second).Should(BeNumerically(">=", 50))

		By("replacing the certificate and key files with a new certificate from the same CA")
		rotateServerCert(ca, certFile, keyFile)
		var newSerial string
		Eventually(func(g Gomega) {
			s, err := servedSerial(saslAddr, trustCA)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Cmp(oldSerial)).NotTo(BeZero(), "still the old certificate")
			ssl, err := servedSerial(sslAddr, mtls)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ssl.Cmp(s)).To(BeZero(), "the SSL listener serves another certificate")
			newSerial = s.String()
		}).WithTimeout(20 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())

		rotatedAt := acked.Load()
		Eventually(acked.Load).WithTimeout(20*time.Second).Should(BeNumerically(">=", rotatedAt+50), "producing stalled after the rotation")
		stop()
		<-done
		Expect(failed.Load()).To(BeZero(), "produce errors during the rotation, the first: %v", firstErr.Load())
		AddReportEntry("certificate rotation", map[string]any{"oldSerial": oldSerial.String(), "newSerial": newSerial, "acked": acked.Load()})
		By("connecting new clients with the new certificate")
		brokerUnaffected()
	})

	// Last, as a second broker on the volume moves work around.
	It("serves a credential altered through one broker on another broker of the cluster, and closes a TLS client on that broker's PLAINTEXT listener", func() {
		const user, password = "late-user", "late-password-3"
		saslAddr2 := freeAddr()
		b2 := StartBroker(b.Dir, WithBrokerID(2), func(b2 *Broker) {
			b2.ExtraArgs = append(b2.ExtraArgs, brokerArgs(b2.Addr, saslAddr2, freeAddr())...)
		})
		By("creating " + user + " through broker 1")
		altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: password}})
		Expect(err).NotTo(HaveOccurred())
		Expect(altered[user].Err).NotTo(HaveOccurred())
		By("authenticating as " + user + " on broker 2")
		Expect(newSecureClient(saslAddr2, trustCA, kgo.SASL(scram512(user, password))).Ping(ctx)).To(Succeed())
		By("deleting " + user + " through broker 2; broker 1 then refuses it")
		deleted, err := NewAdmin(b2).AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: user, Mechanism: kadm.ScramSha512}}, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(deleted[user].Err).NotTo(HaveOccurred())
		err = newSecureClient(saslAddr, trustCA, kgo.SASL(scram512(user, password))).Ping(ctx)
		Expect(errors.Is(err, kerr.SaslAuthenticationFailed)).To(BeTrue(), "a deleted user: %v", err)

		By("opening TLS to broker 2's PLAINTEXT listener")
		_, err = dialRaw(b2.Addr, trustCA)
		Expect(err).To(HaveOccurred(), "a plaintext listener completed a TLS handshake")
		Expect(NewAdmin(b2).BrokerMetadata(ctx)).Error().NotTo(HaveOccurred(), "broker 2's PLAINTEXT listener after the TLS client")
		brokerUnaffected()
	})
})
