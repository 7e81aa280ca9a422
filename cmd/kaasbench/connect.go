package main

// The connect measurement: what a new connection costs. Each of N
// connections dials, completes the TLS handshake (on a TLS listener), asks
// ApiVersions and, on a SASL listener, logs in (SaslHandshake, then
// SaslAuthenticate until the mechanism is done), then closes. P workers
// connect one after another; conns/s is N over the wall time. CPU per
// connection is this process's (getrusage) and, with --broker-pid, the
// broker's (/proc/PID/stat), both over the whole measurement.

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// connectResult is the connect measurement of one listener.
type connectResult struct {
	Conns       int64          `json:"conns"` // completed
	Errors      int64          `json:"errors"`
	FirstError  string         `json:"first_error,omitempty"`
	Parallel    int            `json:"parallel"`
	Seconds     float64        `json:"seconds"`
	ConnsPerSec float64        `json:"conns_per_sec"`
	Total       latencySummary `json:"total"`         // dial to the last answer
	TLS         latencySummary `json:"tls_handshake"` // empty without TLS
	SASL        latencySummary `json:"sasl_login"`    // empty without SASL
	ClientCPUMs float64        `json:"client_cpu_ms_per_conn"`
	BrokerCPUMs float64        `json:"broker_cpu_ms_per_conn,omitempty"` // 0: not measured
}

// connectTimings is one connection's phases.
type connectTimings struct{ total, tls, sasl time.Duration }

// measureConnect opens n connections to addr with sec, parallel at a time.
// brokerPID, if not 0, is the broker process whose CPU time is read.
func measureConnect(ctx context.Context, addr string, sec security, n, parallel, brokerPID int) (*connectResult, error) {
	total, tlsH, saslH := newHistogram(), newHistogram(), newHistogram()
	var (
		mu       sync.Mutex
		next     atomic.Int64
		failed   atomic.Int64
		firstErr atomic.Pointer[error]
		wg       sync.WaitGroup
	)
	cpu0, cpuOK := processCPU()
	b0, bOK := brokerCPU(brokerPID)
	start := time.Now()
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				t, err := connectOnce(ctx, addr, sec)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, &err)
					continue
				}
				mu.Lock()
				total.RecordDuration(t.total)
				if sec.TLS {
					tlsH.RecordDuration(t.tls)
				}
				if sec.SASLMechanism != "" {
					saslH.RecordDuration(t.sasl)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := &connectResult{Conns: int64(total.Count()), Errors: failed.Load(), Parallel: parallel, Seconds: elapsed.Seconds(),
		Total: summarize(total), TLS: summarize(tlsH), SASL: summarize(saslH)}
	r.ConnsPerSec = float64(r.Conns) / r.Seconds
	if cpu1, ok := processCPU(); ok && cpuOK && r.Conns > 0 {
		r.ClientCPUMs = msPer(cpu1-cpu0, r.Conns)
	}
	if b1, ok := brokerCPU(brokerPID); ok && bOK && r.Conns > 0 {
		r.BrokerCPUMs = msPer(b1-b0, r.Conns)
	}
	if e := firstErr.Load(); e != nil {
		r.FirstError = (*e).Error()
		return r, fmt.Errorf("%d of %d connections failed (first: %w)", r.Errors, n, *e)
	}
	return r, ctx.Err()
}

func msPer(d time.Duration, n int64) float64 { return float64(d) / 1e6 / float64(n) }

// connectOnce makes one connection and times its phases.
func connectOnce(ctx context.Context, addr string, sec security) (connectTimings, error) {
	var t connectTimings
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return t, err
	}
	defer func() { _ = nc.Close() }()
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	if sec.TLS {
		cfg := sec.tlsConfig.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(addr)
		}
		tc := tls.Client(nc, cfg)
		t0 := time.Now()
		if err := tc.HandshakeContext(ctx); err != nil {
			return t, fmt.Errorf("TLS handshake: %w", err)
		}
		t.tls = time.Since(t0)
		nc = tc
	}
	rt := &roundTripper{rw: nc, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("kaasbench"))}
	av := kmsg.NewPtrApiVersionsRequest()
	av.Version = 3
	av.ClientSoftwareName, av.ClientSoftwareVersion = "kaasbench", "1"
	avResp := kmsg.NewPtrApiVersionsResponse()
	if err := rt.do(av, avResp); err != nil {
		return t, fmt.Errorf("ApiVersions: %w", err)
	}
	if err := kerr.ErrorForCode(avResp.ErrorCode); err != nil {
		return t, fmt.Errorf("ApiVersions: %w", err)
	}
	if m := sec.mechanism(); m != nil {
		t0 := time.Now()
		if err := saslLogin(ctx, rt, m.Name(), addr, sec); err != nil {
			return t, err
		}
		t.sasl = time.Since(t0)
	}
	t.total = time.Since(start)
	return t, nil
}

// saslLogin runs SaslHandshake v1 and SaslAuthenticate v2 until the
// mechanism is done.
func saslLogin(ctx context.Context, rt *roundTripper, name, addr string, sec security) error {
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, name
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	if err := rt.do(hs, hsResp); err != nil {
		return fmt.Errorf("SaslHandshake: %w", err)
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return fmt.Errorf("SaslHandshake %s: %w", name, err)
	}
	sess, msg, err := sec.mechanism().Authenticate(ctx, addr)
	if err != nil {
		return fmt.Errorf("SASL %s: %w", name, err)
	}
	for step := 0; ; step++ {
		if step == 8 {
			return fmt.Errorf("SASL %s: no end after %d messages", name, step)
		}
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 2, msg
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		if err := rt.do(req, resp); err != nil {
			return fmt.Errorf("SaslAuthenticate: %w", err)
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = ": " + *resp.ErrorMessage
			}
			return fmt.Errorf("SaslAuthenticate: %w%s", err, msg)
		}
		done, more, err := sess.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return fmt.Errorf("SASL %s: %w", name, err)
		}
		if done {
			return nil
		}
		msg = more
	}
}

// roundTripper sends one request at a time on a connection and reads its
// answer.
type roundTripper struct {
	rw   io.ReadWriter
	f    *kmsg.RequestFormatter
	corr int32
	buf  []byte
}

func (r *roundTripper) do(req kmsg.Request, resp kmsg.Response) error {
	r.corr++
	r.buf = r.f.AppendRequest(r.buf[:0], req, r.corr)
	if _, err := r.rw.Write(r.buf); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(r.rw, size[:]); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(size[:]))
	if n < 4 || n > 1<<20 {
		return fmt.Errorf("answer of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r.rw, body); err != nil {
		return err
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != r.corr {
		return fmt.Errorf("answer to correlation id %d, want %d", corr, r.corr)
	}
	body = body[4:]
	// Flexible answers carry header tags, except ApiVersions'.
	if req.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		if len(body) == 0 || body[0] != 0 {
			return errors.New("unexpected response header tags")
		}
		body = body[1:]
	}
	resp.SetVersion(req.GetVersion())
	return resp.ReadFrom(body)
}
