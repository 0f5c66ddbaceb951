package e2e

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/contractd/contractd/internal/testkit"
	"github.com/jackc/pgx/v5"
)

// BenchmarkReplicas compares one contractd replica with three on one
// PostgreSQL review store, the same load through the round-robin balancer:
// 16 clients in a closed loop, valid requests with every tenth one ending
// in needs_review (stored). It reports requests per second and the CPU
// each request costs in the contractd processes, in PostgreSQL and in
// this process (the clients and the fake upstream), all on the same cores.
//
//	go test -run '^$' -bench Replicas -benchtime 3000x ./e2e/
func BenchmarkReplicas(b *testing.B) {
	up := newUpstream(b, byModel)
	up.SetQuiet(true)
	// Both clusters live for the whole run so the sub-benchmarks (run once
	// with N=1, then with N) measure warm processes.
	// "3/procs1": three replicas with GOMAXPROCS=1 each, as CPU-limited
	// pods would run; three with the default each schedule on both cores.
	clusters := map[string]*cluster{
		"1":        startCluster(b, 1, clusterOpts{upstream: up.URL()}),
		"3":        startCluster(b, 3, clusterOpts{upstream: up.URL()}),
		"3/procs1": startCluster(b, 3, clusterOpts{upstream: up.URL(), env: []string{"GOMAXPROCS=1"}}),
	}
	dsn := os.Getenv(testkit.PostgresDSNEnv)
	// Warm every process (pool connections open, tokenizers loaded) so the
	// server processes listed below are all there is to count.
	for _, c := range clusters {
		for i := range 300 {
			if o := c.do(i%10 == 0); !o.ok() {
				b.Fatalf("warm-up: %d %s", o.status, o.err)
			}
		}
	}
	// Rounds interleave the three so a noisy moment on the shared machine
	// hits them alike (go test -count would run each one's rounds in a row).
	for range benchRounds {
		for _, name := range []string{"1", "3", "3/procs1"} {
			b.Run("replicas="+name, func(b *testing.B) { benchCluster(b, clusters[name], dsn) })
		}
	}
}

// benchRounds is how many times each configuration is measured per run.
const benchRounds = 3

func benchCluster(b *testing.B, c *cluster, dsn string) {
	{
		{
			// Per server process, so backends the pools open during the
			// run count from zero.
			pg0 := map[int]time.Duration{}
			for _, pid := range postgresPIDs(b, dsn) {
				pg0[pid] = sumCPU([]int{pid})
			}
			cd0, self0 := c.cpu(), testkit.ProcessCPU()
			var next atomic.Int64
			var failed atomic.Int64
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range 16 {
				wg.Go(func() {
					for {
						i := next.Add(1)
						if i > int64(b.N) {
							return
						}
						if o := c.do(i%10 == 0); !o.ok() {
							failed.Add(1)
						}
					}
				})
			}
			wg.Wait()
			el := time.Since(start)
			b.StopTimer()
			if f := failed.Load(); f > 0 {
				b.Fatalf("%d of %d requests failed", f, b.N)
			}
			per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(b.N) }
			b.ReportMetric(float64(b.N)/el.Seconds(), "req/s")
			b.ReportMetric(per(c.cpu()-cd0), "contractd-cpu-us/req")
			var pg time.Duration
			for _, pid := range postgresPIDs(b, dsn) {
				pg += sumCPU([]int{pid}) - pg0[pid]
			}
			b.ReportMetric(per(pg), "pg-cpu-us/req")
			b.ReportMetric(per(testkit.ProcessCPU()-self0), "driver-cpu-us/req")
		}
	}
}

// cpu is the user+system CPU the cluster's processes have used.
func (c *cluster) cpu() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pids []int
	for _, d := range c.replicas {
		if d != nil {
			pids = append(pids, d.cmd.Process.Pid)
		}
	}
	return sumCPU(pids)
}

// sumCPU adds utime and stime from /proc/<pid>/stat (clock ticks of 10 ms).
func sumCPU(pids []int) time.Duration {
	var total time.Duration
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue // exited
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		// After "pid (comm) ", field 3 is state: utime and stime are 14 and 15.
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(ut+st) * 10 * time.Millisecond
	}
	return total
}

// postgresPIDs lists the server's processes (backends and background
// workers alike appear in pg_stat_activity).
func postgresPIDs(b *testing.B, dsn string) []int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, `SELECT pid FROM pg_stat_activity`)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		b.Fatal(err)
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out
}
