package wire

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kaas-dev/kaas/engine/auth"
	"github.com/kaas-dev/kaas/volume"
)

// dirStore is the credential store under a test's cluster directory.
type dirStore struct{ dir string }

func (s dirStore) LoadCredential(user string, m auth.Mechanism) (auth.Credential, bool, error) {
	return auth.LoadCredential(volume.OS(), s.dir, user, m)
}
func (s dirStore) SaveCredential(c auth.Credential) error {
	return auth.SaveCredential(volume.OS(), s.dir, c)
}
func (s dirStore) DeleteCredential(user string, m auth.Mechanism) (bool, error) {
	return auth.DeleteCredential(volume.OS(), s.dir, user, m)
}
func (s dirStore) ListCredentials() ([]auth.Credential, error) {
	return auth.ListCredentials(volume.OS(), s.dir)
}

// stored is "user/mechanism/iterations" for every stored credential.
func (s dirStore) stored(t *testing.T) []string {
	t.Helper()
	creds, err := s.ListCredentials()
	if err != nil {
		t.Fatalf("list credentials: %v", err)
	}
	var out []string
	for _, c := range creds {
		out = append(out, c.User+"/"+c.Mechanism+"/"+itoa(int32(c.Iterations)))
	}
	return out
}

func seedCredential(t *testing.T, s dirStore, user string, m auth.Mechanism, password string, iterations int) {
	t.Helper()
	c, err := m.FromPassword(user, password, iterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SaveCredential(c); err != nil {
		t.Fatal(err)
	}
}

// upsertion is what a client sends for password: the salt and Hi(password).
func upsertion(user string, typ int8, password string, iterations int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = user, typ, iterations
	u.Salt = []byte("salt-of-" + user)
	h, size := sha256.New, sha256.Size
	if typ == 2 {
		h, size = sha512.New, sha512.Size
	}
	if iterations > 0 {
		var err error
		if u.SaltedPassword, err = pbkdf2.Key(h, password, u.Salt, int(iterations), size); err != nil {
			panic(err)
		}
	}
	return u
}

func deletion(user string, typ int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = user, typ
	return d
}

func TestAlterUserScramCredentials(t *testing.T) {
	type result struct {
		user string
		code int16
		msg  string // a part of the message
	}
	many := make([]kmsg.AlterUserSCRAMCredentialsRequestDeletion, maxScramUsers)
	for i := range many {
		many[i] = deletion("user"+itoa(int32(i)), 1)
	}
	tests := []struct {
		name       string
		seed       []string // users with a SCRAM-SHA-256 credential, 4096 iterations
		deletions  []kmsg.AlterUserSCRAMCredentialsRequestDeletion
		upsertions []kmsg.AlterUserSCRAMCredentialsRequestUpsertion
		want       []result
		stored     []string
	}{
		{name: "new user", upsertions: []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsertion("alice", 2, "pw", 8192)},
			want: []result{{"alice", 0, ""}}, stored: []string{"alice/SCRAM-SHA-512/8192"}},
		{name: "replace", seed: []string{"alice"}, upsertions: []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsertion("alice", 1, "pw", 5000)},
			want: []result{{"alice", 0, ""}}, stored: []string{"alice/SCRAM-SHA-256/5000"}},
		{name: "delete", seed: []string{"alice", "bob"}, deletions: []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("alice", 1)},
			want: []result{{"alice", 0, ""}}, stored: []string{"bob/SCRAM-SHA-256/4096"}},
		{name: "delete missing mechanism", seed: []string{"alice"}, deletions: []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("alice", 2)},
			want: []result{{"alice", kerr.ResourceNotFound.Code, "does not exist"}}, stored: []string{"alice/SCRAM-SHA-256/4096"}},
		{name: "delete missing user", deletions: []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("nobody", 1)},
			want: []result{{"nobody", kerr.ResourceNotFound.Code, "Attempt to delete a user credential that does not exist"}}},
		{name: "too few iterations", upsertions: []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsertion("alice", 1, "pw", 4095)},
			want: []result{{"alice", kerr.UnacceptableCredential.Code, "Too few iterations"}}},
		{name: "too many iterations", upsertions: []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsertion("alice", 2, "pw", 16385)},
			want: []result{{"alice", kerr.UnacceptableCredential.Code, "Too many iterations"}}},
		{name: "unknown mechanism to upsert", upsertions: []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsertion("alice", 3, "pw", 4096)},
			want: []result{{"alice", kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism"}}},
		{name: "unknown mechanism to delete", seed: []string{"alice"}, deletions: []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("alice", 0)},
			want: []result{{"alice", kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism"}}, stored: []string{"alice/SCRAM-SHA-256/4096"}},
		{name: "empty user to upsert", upsertions: []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsertion("", 1, "pw", 4096)},
			want: []result{{"", kerr.UnacceptableCredential.Code, "Username must not be empty"}}},
		{name: "empty user to delete", deletions: []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("", 1)},
			want: []result{{"", kerr.UnacceptableCredential.Code, "Username must not be empty"}}},
		{name: "empty salt", upsertions: func() []kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
			u := upsertion("alice", 1, "pw", 4096)
			u.Salt = nil
			return []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{u}
		}(), want: []result{{"alice", kerr.UnacceptableCredential.Code, "salt"}}},
		{name: "salted password of the wrong length", upsertions: func() []kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
			u := upsertion("alice", 2, "pw", 4096)
			u.SaltedPassword = u.SaltedPassword[:32]
			return []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{u}
		}(), want: []result{{"alice", kerr.UnacceptableCredential.Code, "salted password of 32 bytes"}}},
		{name: "deleted and upserted", seed: []string{"alice"},
			deletions:  []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("alice", 1)},
			upsertions: []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsertion("alice", 2, "pw", 4096)},
			want:       []result{{"alice", kerr.DuplicateResource.Code, "cannot be altered twice"}}, stored: []string{"alice/SCRAM-SHA-256/4096"}},
		{name: "upserted twice", upsertions: []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
			upsertion("alice", 1, "pw", 4096), upsertion("alice", 2, "pw", 4096), upsertion("alice", 2, "pw", 4096)},
			want: []result{{"alice", kerr.DuplicateResource.Code, "cannot be altered twice"}}},
		{name: "other users are altered", seed: []string{"carol"},
			deletions: []kmsg.AlterUserSCRAMCredentialsRequestDeletion{deletion("carol", 1), deletion("dave", 1)},
			upsertions: []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{
				upsertion("alice", 1, "pw", 4096), upsertion("bob", 2, "pw", 100), upsertion("erin", 2, "pw", 16384)},
			want: []result{{"carol", 0, ""}, {"dave", kerr.ResourceNotFound.Code, "does not exist"},
				{"alice", 0, ""}, {"bob", kerr.UnacceptableCredential.Code, "Too few"}, {"erin", 0, ""}},
			stored: []string{"alice/SCRAM-SHA-256/4096", "erin/SCRAM-SHA-512/16384"}},
		{name: "too many alterations", seed: []string{"alice"}, deletions: many,
			upsertions: []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{upsertion("alice", 1, "pw", 4096)},
			want: func() []result {
				var out []result
				for i := range many {
					out = append(out, result{"user" + itoa(int32(i)), kerr.InvalidRequest.Code, "at most 1000 alterations, this one makes 1001"})
				}
				return append(out, result{"alice", kerr.InvalidRequest.Code, "at most 1000"})
			}(), stored: []string{"alice/SCRAM-SHA-256/4096"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := dirStore{dir: t.TempDir()}
			for _, u := range tc.seed {
				seedCredential(t, s, u, auth.ScramSHA256, "old", 4096)
			}
			req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
			req.Deletions, req.Upsertions = tc.deletions, tc.upsertions
			got := alterScramCredentials(req, s)
			if len(got) != len(tc.want) {
				t.Fatalf("%d results, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.User != w.user || g.ErrorCode != w.code {
					t.Errorf("result %d: %q code %d, want %q code %d", i, g.User, g.ErrorCode, w.user, w.code)
				}
				switch {
				case w.code == 0 && g.ErrorMessage != nil:
					t.Errorf("result %d: message %q on success", i, *g.ErrorMessage)
				case w.code != 0 && (g.ErrorMessage == nil || !strings.Contains(*g.ErrorMessage, w.msg)):
					t.Errorf("result %d: message %v, want one with %q", i, g.ErrorMessage, w.msg)
				}
			}
			if st := s.stored(t); !slices.Equal(st, tc.stored) {
				t.Errorf("stored %v, want %v", st, tc.stored)
			}
		})
	}
}

func TestAlterUserScramCredentialsStoresThePassword(t *testing.T) {
	s := dirStore{dir: t.TempDir()}
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = append(req.Upsertions, upsertion("alice", 2, "secret", 4096), upsertion("bob", 1, "hunter2", 4096))
	for _, r := range alterScramCredentials(req, s) {
		if r.ErrorCode != 0 {
			t.Fatalf("%s: code %d", r.User, r.ErrorCode)
		}
	}
	for _, tc := range []struct {
		user, password string
		m              auth.Mechanism
		want           bool
	}{
		{"alice", "secret", auth.ScramSHA512, true},
		{"alice", "Secret", auth.ScramSHA512, false},
		{"bob", "hunter2", auth.ScramSHA256, true},
		{"bob", "secret", auth.ScramSHA256, false},
	} {
		c, ok, err := s.LoadCredential(tc.user, tc.m)
		if err != nil || !ok {
			t.Fatalf("load %s: ok %v, %v", tc.user, ok, err)
		}
		if got := tc.m.VerifyPassword(c, tc.password); got != tc.want {
			t.Errorf("%s with %q: verified %v, want %v", tc.user, tc.password, got, tc.want)
		}
	}
}

func TestDescribeUserScramCredentials(t *testing.T) {
	type result struct {
		user  string
		code  int16
		msg   string
		infos []int32 // mechanism*100000 + iterations
	}
	many := make([]kmsg.DescribeUserSCRAMCredentialsRequestUser, maxScramUsers+1)
	tests := []struct {
		name    string
		users   []string // nil: all
		many    bool
		want    []result
		wantErr int16
	}{
		{name: "all", want: []result{
			{"alice", 0, "", []int32{104096, 208192}}, {"bob", 0, "", []int32{204096}}}},
		{name: "named", users: []string{"bob", "alice"}, want: []result{
			{"bob", 0, "", []int32{204096}}, {"alice", 0, "", []int32{104096, 208192}}}},
		{name: "unknown user", users: []string{"nobody", "bob"}, want: []result{
			{"nobody", kerr.ResourceNotFound.Code, "Attempt to describe a user credential that does not exist: nobody", nil},
			{"bob", 0, "", []int32{204096}}}},
		{name: "named twice", users: []string{"alice", "bob", "alice"}, want: []result{
			{"alice", kerr.DuplicateResource.Code, "Cannot describe SCRAM credentials for the same user twice in a single request: alice", nil},
			{"bob", 0, "", []int32{204096}}}},
		{name: "empty name", users: []string{""}, want: []result{
			{"", kerr.ResourceNotFound.Code, "empty username", nil}}},
		{name: "too many users", many: true, wantErr: kerr.InvalidRequest.Code},
	}
	s := dirStore{dir: t.TempDir()}
	seedCredential(t, s, "alice", auth.ScramSHA256, "pw", 4096)
	seedCredential(t, s, "alice", auth.ScramSHA512, "pw", 8192)
	seedCredential(t, s, "bob", auth.ScramSHA512, "pw", 4096)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var (
				got []kmsg.DescribeUserSCRAMCredentialsResponseResult
				err error
			)
			switch {
			case tc.many:
				got, err = describeScramUsers(many, s.LoadCredential)
			case tc.users == nil:
				got, err = describeAllScramUsers(s.ListCredentials)
			default:
				var users []kmsg.DescribeUserSCRAMCredentialsRequestUser
				for _, u := range tc.users {
					ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
					ru.Name = u
					users = append(users, ru)
				}
				got, err = describeScramUsers(users, s.LoadCredential)
			}
			if errorCode(err) != tc.wantErr {
				t.Fatalf("error %v (code %d), want code %d", err, errorCode(err), tc.wantErr)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%d results, want %d: %+v", len(got), len(tc.want), got)
			}
			for i, w := range tc.want {
				g := got[i]
				var infos []int32
				for _, ci := range g.CredentialInfos {
					infos = append(infos, int32(ci.Mechanism)*100000+ci.Iterations)
				}
				if g.User != w.user || g.ErrorCode != w.code || !slices.Equal(infos, w.infos) {
					t.Errorf("result %d: %q code %d infos %v, want %q code %d infos %v", i, g.User, g.ErrorCode, infos, w.user, w.code, w.infos)
				}
				if (w.code == 0) != (g.ErrorMessage == nil) || (g.ErrorMessage != nil && !strings.Contains(*g.ErrorMessage, w.msg)) {
					t.Errorf("result %d: message %v, want %q", i, g.ErrorMessage, w.msg)
				}
			}
		})
	}
}

// TestScramCredentialsThroughKadm alters and describes credentials with
// franz-go's admin client against a broker: the files land in the
// engine's cluster directory, where kaasctl users and the SASL listeners
// find them.
func TestScramCredentialsThroughKadm(t *testing.T) {
	b := startBroker(t, nil)
	adm := kadm.NewClient(b.client(t))
	ctx := context.Background()
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "secret"},
	})
	if err != nil {
		t.Fatalf("AlterUserSCRAMs: %v", err)
	}
	if err := altered["alice"].Err; err != nil {
		t.Errorf("alice: %v", err)
	}
	store := dirStore{dir: filepath.Join(b.dir, "__cluster")}
	c, ok, err := store.LoadCredential("alice", auth.ScramSHA512)
	if err != nil || !ok || !auth.ScramSHA512.VerifyPassword(c, "secret") {
		t.Fatalf("alice's stored credential: ok %v, %v", ok, err)
	}
	seedCredential(t, store, "carol", auth.ScramSHA256, "pw", 5000) // as kaasctl users set does
	described, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatalf("DescribeUserSCRAMs: %v", err)
	}
	if len(described) != 2 || len(described["alice"].CredInfos) != 1 || described["carol"].CredInfos[0].Iterations != 5000 {
		t.Errorf("described %+v", described)
	}
	described, err = adm.DescribeUserSCRAMs(ctx, "nobody")
	if err != nil {
		t.Fatalf("DescribeUserSCRAMs: %v", err)
	}
	if err := described["nobody"].Err; err != kerr.ResourceNotFound {
		t.Errorf("nobody: %v, want RESOURCE_NOT_FOUND", err)
	}
	deleted, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || deleted["alice"].Err != nil {
		t.Fatalf("delete alice: %v %v", err, deleted["alice"].Err)
	}
	if st := store.stored(t); !slices.Equal(st, []string{"carol/SCRAM-SHA-256/5000"}) {
		t.Errorf("stored %v", st)
	}
}

func TestDescribeUserScramCredentialsStoreErrors(t *testing.T) {
	broken := errors.New("volume unreadable")
	_, err := describeAllScramUsers(func() ([]auth.Credential, error) { return nil, broken })
	if !errors.Is(err, broken) || errorCode(err) != kerr.KafkaStorageError.Code {
		t.Errorf("describe all: %v (code %d), want the store's error as KAFKA_STORAGE_ERROR", err, errorCode(err))
	}
	users := []kmsg.DescribeUserSCRAMCredentialsRequestUser{{Name: "alice"}}
	got, err := describeScramUsers(users, func(string, auth.Mechanism) (auth.Credential, bool, error) {
		return auth.Credential{}, false, broken
	})
	if err != nil || len(got) != 1 {
		t.Fatalf("describe alice: %v, %+v", err, got)
	}
	if got[0].ErrorCode != kerr.KafkaStorageError.Code || got[0].ErrorMessage == nil || !strings.Contains(*got[0].ErrorMessage, "volume unreadable") {
		t.Errorf("alice: code %d message %v, want KAFKA_STORAGE_ERROR with the cause", got[0].ErrorCode, got[0].ErrorMessage)
	}
}
