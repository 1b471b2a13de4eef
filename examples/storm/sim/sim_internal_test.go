package sim

import "testing"

func TestPeakAndP99(t *testing.T) {
	tests := []struct {
		in        []int32
		peak, p99 int
	}{
		{nil, 0, 0},
		{[]int32{7}, 7, 7},
		// 100 windows 1..100: nearest rank ceil(99) = 99th value.
		{seq(100), 100, 99},
		// 200 windows: rank 198.
		{seq(200), 200, 198},
		// One spike among empty windows: p99 ignores it.
		{append(make([]int32, 199), 1000), 1000, 0},
	}
	for _, tt := range tests {
		peak, p99 := peakAndP99(tt.in)
		if peak != tt.peak || p99 != tt.p99 {
			t.Errorf("peakAndP99(len %d) = %d, %d; want %d, %d", len(tt.in), peak, p99, tt.peak, tt.p99)
		}
	}
}

func seq(n int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[len(s)-1-i] = int32(i + 1) // descending: the function must sort
	}
	return s
}
