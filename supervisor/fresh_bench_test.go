package supervisor_test

import (
	"context"
	"testing"
	"time"
)

// BenchmarkFreshSandbox: what the first exception and the first cancel of
// a sandbox cost (each iteration starts a new one, untimed): the
// traceback machinery is warm from boot, through the boot snapshot.
func BenchmarkFreshSandbox(b *testing.B) {
	ctx := context.Background()
	for _, m := range benchModes {
		b.Run("first-exception/"+m.Name, func(b *testing.B) {
			cfg := benchConfig(b, m.Mode)
			var lat latencies
			for b.Loop() {
				b.StopTimer()
				sb := readySandbox(b, cfg)
				b.StartTimer()
				t0 := time.Now()
				ce, err := sb.Execute(ctx, "1/0")
				lat.add(time.Since(t0))
				if err != nil || ce.ErrorType != "ZeroDivisionError" {
					b.Fatalf("%v %+v", err, ce)
				}
				b.StopTimer()
				sb.Destroy()
				b.StartTimer()
			}
			lat.report(b)
		})
		b.Run("first-cancel/"+m.Name, func(b *testing.B) {
			cfg := benchConfig(b, m.Mode)
			started := onGo(&cfg)
			var lat latencies
			for b.Loop() {
				b.StopTimer()
				sb := readySandbox(b, cfg)
				b.StartTimer()
				done := make(chan time.Time, 1)
				var err error
				go func() {
					_, err = sb.Execute(ctx, "print('go', flush=True)\nwhile True: pass")
					done <- time.Now()
				}()
				<-started
				t0 := time.Now()
				sb.Cancel()
				lat.add((<-done).Sub(t0))
				if err == nil {
					b.Fatal("the cancelled execution returned no error")
				}
				b.StopTimer()
				sb.Destroy()
				b.StartTimer()
			}
			lat.report(b)
		})
	}
}
