package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"time"
)

// cmdScrape calls a URL every few seconds and logs what it got: the
// demo's scraper, a steady user of the API through the load balancer. Its
// kept-alive connection is how the agents discover that it uses it.
func cmdScrape(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("scrape", stderr)
	url := fs.String("url", "", "URL to call")
	every := fs.Duration("every", 3*time.Second, "how often")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" {
		return usageError("scrape needs --url")
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	client := &http.Client{Timeout: 5 * time.Second}
	t := time.NewTicker(*every)
	defer t.Stop()
	for {
		start := time.Now()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
		resp, err := client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			logger.Warn("scrape failed", "url", *url, "err", err)
		} else {
			n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close() // read to the end: the connection is kept for the next call
			level := slog.LevelInfo
			if resp.StatusCode >= 400 {
				level = slog.LevelWarn
			}
			logger.Log(ctx, level, "scraped", "url", *url, "status", resp.StatusCode, "ms", time.Since(start).Milliseconds(), "bytes", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
