// Command gen writes made-up openai-jsonl gateway logs, the demo's input
// (see capture.WriteSampleLogs). All text is invented. An output named
// *.gz is gzipped, as the demo writes its logs.
//
//	go run ./testdata/samplelogs/gen -out testdata/samplelogs/sample.jsonl -seed 1
package main

import (
	"compress/gzip"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tokentrace/tokentrace/capture"
)

func main() {
	out := flag.String("out", "-", "output file (- = stdout)")
	seed := flag.Int64("seed", 1, "random seed")
	dur := flag.Duration("duration", capture.DefaultSampleOptions().Duration, "span of arrivals")
	rate := flag.Float64("rate", capture.DefaultSampleOptions().Rate, "new conversations per second outside the burst")
	flag.Parse()
	o := capture.DefaultSampleOptions()
	o.Duration, o.Rate = *dur, *rate
	w := os.Stdout
	if *out != "-" {
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
		w = f
	}
	start := time.Now()
	var dst io.Writer = w
	var zw *gzip.Writer
	if strings.HasSuffix(*out, ".gz") {
		zw = gzip.NewWriter(w)
		dst = zw
	}
	err := capture.WriteSampleLogs(context.Background(), dst, *seed, o)
	if err == nil && zw != nil {
		err = zw.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if w != os.Stdout {
		if err := w.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
	}
	fmt.Fprintf(os.Stderr, "gen: wrote %s in %v\n", *out, time.Since(start).Round(time.Millisecond))
}
