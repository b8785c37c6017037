package main

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// serveMetrics are the Prometheus metrics of serve --listen (docs/serve.md
// lists them). Its methods do nothing on a nil *serveMetrics.
type serveMetrics struct {
	reg             *prometheus.Registry
	live            prometheus.Gauge
	createdTotal    prometheus.Counter
	destroyedTotal  prometheus.Counter
	failedTotal     prometheus.Counter
	executions      *prometheus.CounterVec
	executeSeconds  prometheus.Histogram
	bridgeSeconds   *prometheus.HistogramVec
	rssBytes        prometheus.Gauge
	connections     prometheus.Gauge
	unauthenticated prometheus.Gauge
	connectionsSeen prometheus.Counter
	rejectedTotal   *prometheus.CounterVec
	poolIdle        prometheus.Gauge
}

func newServeMetrics() *serveMetrics {
	const ns = "rlm_sandbox"
	buckets := prometheus.ExponentialBuckets(0.0005, 2, 18) // 0.5 ms to ~65 s
	m := &serveMetrics{
		reg:             prometheus.NewRegistry(),
		live:            prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "sandboxes_live", Help: "Sandboxes admitted and not yet ended (starting ones included)."}),
		createdTotal:    prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "sandboxes_created_total", Help: "Sandboxes created (create answered with a sandbox)."}),
		destroyedTotal:  prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "sandboxes_destroyed_total", Help: "Created sandboxes that ended (destroy, or their connection ended)."}),
		failedTotal:     prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "sandboxes_failed_total", Help: "Creates that failed to start a sandbox."}),
		executions:      prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "executions_total", Help: "Executes by outcome: ok, exception (Python raised), timeout, canceled, interrupted, dead, ..."}, []string{"outcome"}),
		executeSeconds:  prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Name: "execute_seconds", Help: "Wall time of execute, bridge waits included.", Buckets: buckets}),
		bridgeSeconds:   prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "bridge_seconds", Help: "Time the client took to answer a bridge request (llm_query, rlm_query).", Buckets: buckets}, []string{"method"}),
		rssBytes:        prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "worker_rss_bytes", Help: "Resident memory of the live sandboxes' workers, as last measured, summed."}),
		connections:     prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "connections", Help: "Client connections open and authenticated (or with nothing to authenticate): those --max-connections counts."}),
		unauthenticated: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "connections_unauthenticated", Help: "Client connections open and waiting to authenticate."}),
		connectionsSeen: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Name: "connections_total", Help: "Client connections accepted."}),
		rejectedTotal:   prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "rejected_total", Help: "Requests and connections refused, by reason (a limit, or unauthorized)."}, []string{"reason"}),
		poolIdle:        prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Name: "pool_idle", Help: "Warm sandboxes waiting in the pool."}),
	}
	m.reg.MustRegister(m.live, m.createdTotal, m.destroyedTotal, m.failedTotal, m.executions, m.executeSeconds,
		m.bridgeSeconds, m.rssBytes, m.connections, m.unauthenticated, m.connectionsSeen, m.rejectedTotal, m.poolIdle,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *serveMetrics) setLive(n int) {
	if m != nil {
		m.live.Set(float64(n))
	}
}

func (m *serveMetrics) created() {
	if m != nil {
		m.createdTotal.Inc()
	}
}

func (m *serveMetrics) destroyed() {
	if m != nil {
		m.destroyedTotal.Inc()
	}
}

func (m *serveMetrics) failed() {
	if m != nil {
		m.failedTotal.Inc()
	}
}

func (m *serveMetrics) execution(outcome string, d time.Duration) {
	if m != nil {
		m.executions.WithLabelValues(outcome).Inc()
		m.executeSeconds.Observe(d.Seconds())
	}
}

func (m *serveMetrics) bridge(method string, d time.Duration) {
	if m != nil {
		m.bridgeSeconds.WithLabelValues(method).Observe(d.Seconds())
	}
}

func (m *serveMetrics) setRSS(n uint64) {
	if m != nil {
		m.rssBytes.Set(float64(n))
	}
}

func (m *serveMetrics) setConnections(counted, waiting int, opened bool) {
	if m != nil {
		m.connections.Set(float64(counted))
		m.unauthenticated.Set(float64(waiting))
		if opened {
			m.connectionsSeen.Inc()
		}
	}
}

func (m *serveMetrics) rejected(reason string) {
	if m != nil {
		m.rejectedTotal.WithLabelValues(reason).Inc()
	}
}

func (m *serveMetrics) setPoolIdle(n int) {
	if m != nil {
		m.poolIdle.Set(float64(n))
	}
}

// metricsHandler serves /metrics, /healthz (the process answers) and
// /readyz (h.ready: 200 or 503 with the reason).
func metricsHandler(m *serveMetrics, h *hub) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, why := h.ready()
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		w.Write([]byte(why + "\n"))
	})
	return mux
}
