package throttle

import "testing"

type rec struct {
	atMs int64
	v    float64
}

func TestRateMeasure(t *testing.T) {
	tests := []struct {
		name       string
		recs       []rec
		atMs       int64
		wantWindow int64
		wantRate   float64
	}{
		{"young rate is padded to ten full windows", []rec{{0, 1000}}, 0, 10000, 100},
		{"padding shrinks as windows fill", []rec{{0, 1000}, {5000, 1000}}, 5000, 10000, 200},
		{"eleven samples measure over the elapsed time", eachSecond(11, 1000), 10500, 10500, 11000 / 10.5},
		{"a sample older than the whole window is dropped", []rec{{0, 1000}}, 11000, 10000, 0},
		{"the oldest live sample sets the window", []rec{{0, 500}, {3000, 500}, {11500, 500}}, 11500, 10500, 1000 / 10.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewRate(DefaultConfig, 0)
			for _, e := range tt.recs {
				r.Record(e.v, e.atMs)
			}
			if got := r.WindowMs(tt.atMs); got != tt.wantWindow {
				t.Errorf("window = %d ms, want %d", got, tt.wantWindow)
			}
			if got := r.Measure(tt.atMs); !near(got, tt.wantRate) {
				t.Errorf("rate = %v/s, want %v", got, tt.wantRate)
			}
		})
	}
}

func eachSecond(n int, v float64) []rec {
	out := make([]rec, n)
	for i := range out {
		out[i].atMs, out[i].v = int64(i)*1000, v
	}
	return out
}

func near(a, b float64) bool { d := a - b; return d < 1e-9 && d > -1e-9 }

func TestThrottleMs(t *testing.T) {
	tests := []struct {
		name                  string
		observed, limit       float64
		windowMs, maxMs, want int64
	}{
		{"within the limit", 999, 1000, 11000, 0, 0},
		{"at the limit", 1000, 1000, 11000, 0, 0},
		{"double the limit waits one window length", 2000, 1000, 11000, 0, 11000},
		{"ten percent over", 1100, 1000, 10000, 0, 1000},
		{"capped", 2000, 1000, 11000, 1000, 1000},
		{"no limit never throttles", 5000, 0, 11000, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ThrottleMs(tt.observed, tt.limit, tt.windowMs, tt.maxMs); got != tt.want {
				t.Errorf("ThrottleMs = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestLonger(t *testing.T) {
	tests := []struct{ client, broker, want int64 }{{0, 0, 0}, {5, 0, 5}, {0, 7, 7}, {30, 20, 30}, {20, 30, 30}}
	for _, tt := range tests {
		if got := Longer(tt.client, tt.broker); got != tt.want {
			t.Errorf("Longer(%d, %d) = %d, want %d", tt.client, tt.broker, got, tt.want)
		}
	}
}
