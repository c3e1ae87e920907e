// Command httpserver is the HTTP server of the test image kobe.local/httpserver (see the images
// package), and its client.
//
//	httpserver                 serves on $PORT (default 8080): / answers "hello from <hostname>",
//	                           /healthz answers "ok"; each request is logged on stdout
//	httpserver get <url>...    prints each URL's body (exit 1 on an error or a non-200 status);
//	                           Go's own resolver reads the pod's /etc/resolv.conf, so cluster DNS
//	                           names work without libc
//
// It exits at once on SIGTERM, so pods of the image stop without waiting out a grace period.
package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "get" {
		os.Exit(get(os.Args[2:]))
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	host, _ := os.Hostname()
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		log.Printf("request %s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)
		fmt.Fprintf(w, "hello from %s\n", host)
	})
	srv := &http.Server{Addr: ":" + port, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		signals := make(chan os.Signal, 1)
		signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
		<-signals
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	log.Printf("serving on :%s as %s", port, host)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Fatal(err)
	}
}

func get(urls []string) int {
	client := &http.Client{Timeout: 10 * time.Second}
	for _, u := range urls {
		resp, err := client.Get(u)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			fmt.Fprintf(os.Stderr, "%s: HTTP %d %v\n", u, resp.StatusCode, err)
			return 1
		}
		os.Stdout.Write(body)
	}
	return 0
}
