// A Go net/http backend for lila's bench: the same answers as backend-server.js and
// the nginx backends, from another kind of server (goroutine per connection, Go's own
// buffered writes), so that no figure depends on one backend's write pattern.
// Standard library only: built offline by bench/backends.js (go build), cached in
// bench/.cache.
//
//	go-backend -port 0 -name A [-write-size 16384]
//
// Prints "backend A listening on 127.0.0.1:PORT" on stderr once bound.
// GET /        -> 200, "hello" (5 bytes)
// GET /1m      -> 200, 1 MiB
// GET /__count -> 200, the number of requests served so far (this one excluded)
// HTTP/2 by prior knowledge (h2c) is served on the same port too (Go 1.24 and later:
// the line says "h2c" then), for the HTTP/2 workload's h2 backends.
// A request body is read whole before the answer.
// A request with "Connection: close" is answered and the connection closed
// (net/http does that itself). Bodies are written with one Write (net/http sends the
// head and the first 4 KiB, then the rest in one write(2)), or with -write-size in
// writes of that many bytes, as a server streaming from a file or a proxy would.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

var served atomic.Int64

func main() {
	port := flag.Int("port", 0, "port to listen on (0: a free one)")
	name := flag.String("name", "backend", "name printed when listening")
	writeSize := flag.Int("write-size", 0, "write bodies in pieces of this many bytes (0: all at once)")
	flag.Parse()

	hello := []byte("hello")
	mib := bytes.Repeat([]byte("x"), 1024*1024)
	fixed := func(body []byte) http.HandlerFunc {
		length := strconv.Itoa(len(body))
		return func(w http.ResponseWriter, r *http.Request) {
			served.Add(1)
			// A POST's body is read before the answer, as an application would:
			// net/http closes a connection whose unread body is 256 KiB or more,
			// which made P2 a connection per request through every balancer.
			io.Copy(io.Discard, r.Body)
			h := w.Header()
			h["Content-Type"] = []string{"text/plain"}
			h["Content-Length"] = []string{length}
			if *writeSize <= 0 {
				w.Write(body)
				return
			}
			for i := 0; i < len(body); i += *writeSize {
				w.Write(body[i:min(i+*writeSize, len(body))])
			}
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", fixed(hello))
	mux.HandleFunc("/1m", fixed(mib))
	mux.HandleFunc("/__count", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"text/plain"}
		w.Write([]byte(strconv.FormatInt(served.Load(), 10)))
	})

	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fmt.Fprintf(os.Stderr, "backend %s: %v\n", *name, err)
		os.Exit(1)
	}
	server := &http.Server{Handler: mux, IdleTimeout: 300 * time.Second}
	h2c := ""
	if enableH2C(server) {
		h2c = " (h1, h2c)"
	}
	fmt.Fprintf(os.Stderr, "backend %s listening on %s%s\n", *name, ln.Addr(), h2c)
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		os.Exit(0)
	}()
	if err := server.Serve(ln); err != nil {
		fmt.Fprintf(os.Stderr, "backend %s: %v\n", *name, err)
		os.Exit(1)
	}
}
