package envdefault

import (
	"errors"
	"flag"
	"io"
	"testing"
	"time"
)

type vals struct {
	n    int
	b    bool
	d    time.Duration
	s    string
	mode string
}

func newSet(v *vals) *flag.FlagSet {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&v.n, "n", 7, "")
	fs.BoolVar(&v.b, "b", true, "")
	fs.DurationVar(&v.d, "d", time.Second, "")
	fs.StringVar(&v.s, "s", "def", "")
	v.mode = "a"
	fs.Func("mode", "", func(s string) error {
		if s != "a" && s != "b" {
			return errors.New("must be a or b")
		}
		v.mode = s
		return nil
	})
	return fs
}

var vars = Vars{"n": "T_N", "b": "T_B", "d": "T_D", "s": "T_S", "mode": "T_MODE"}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    vals
		wantErr string // the whole message; "" = none
	}{
		{name: "defaults", want: vals{7, true, time.Second, "def", "a"}},
		{name: "from the environment", env: map[string]string{"T_N": "3", "T_B": "false", "T_D": "250ms", "T_S": "x", "T_MODE": "b"},
			want: vals{3, false, 250 * time.Millisecond, "x", "b"}},
		{name: "booleans as strconv.ParseBool reads them", env: map[string]string{"T_B": "FALSE"}, want: vals{7, false, time.Second, "def", "a"}},
		{name: "an empty string is a string", env: map[string]string{"T_S": ""}, want: vals{7, true, time.Second, "", "a"}},
		{name: "a flag wins, and its variable is not even parsed", env: map[string]string{"T_N": "abc"}, args: []string{"-n", "5"},
			want: vals{5, true, time.Second, "def", "a"}},
		{name: "not an integer", env: map[string]string{"T_N": "abc"}, wantErr: `T_N="abc": not an integer (the environment equivalent of --n)`},
		{name: "empty integer", env: map[string]string{"T_N": ""}, wantErr: `T_N="": not an integer (the environment equivalent of --n)`},
		{name: "out of range", env: map[string]string{"T_N": "99999999999999999999"}, wantErr: `T_N="99999999999999999999": out of range (the environment equivalent of --n)`},
		{name: "not a boolean", env: map[string]string{"T_B": "yes"}, wantErr: `T_B="yes": not a boolean (true or false) (the environment equivalent of --b)`},
		{name: "not a duration", env: map[string]string{"T_D": "2"}, wantErr: `T_D="2": not a duration (a number with a unit: 250ms, 2s, 5m) (the environment equivalent of --d)`},
		{name: "a Func flag's own error", env: map[string]string{"T_MODE": "c"}, wantErr: `T_MODE="c": must be a or b (the environment equivalent of --mode)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			var got vals
			_, err := Parse(newSet(&got), tc.args, vars)
			if tc.wantErr != "" {
				var ee *Error
				if err == nil || err.Error() != tc.wantErr || !errors.As(err, &ee) {
					t.Fatalf("err %v, want %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestOrigin(t *testing.T) {
	t.Setenv("T_D", "0x")
	t.Setenv("T_N", "0x10")
	var v vals
	src, err := Parse(newSet(&v), []string{"-d", "2s"}, vars)
	if err != nil || v.n != 16 {
		t.Fatal(v, err)
	}
	for flag, want := range map[string]string{"n": `T_N="0x10"`, "d": "--d=2s", "s": "--s=def"} {
		if got := src.Origin(flag); got != want {
			t.Errorf("Origin(%s) = %s, want %s", flag, got, want)
		}
	}
	if got := src.Invalid("n", "must be small").Error(); got != `T_N="0x10": must be small` {
		t.Errorf("Invalid: %s", got)
	}
}

func TestParseUnknownFlagPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("a variable for a flag that does not exist was accepted")
		}
	}()
	var v vals
	_, _ = Parse(newSet(&v), nil, Vars{"nope": "T_NOPE"})
}
