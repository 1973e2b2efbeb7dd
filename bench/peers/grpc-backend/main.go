// A Go gRPC backend for lila's bench (workload G1): grpc-go serving the standard
// health service, grpc.health.v1.Health/Check, as a unary method that counts its
// calls. Built by bench/backends.js (go build, with the module proxy for
// google.golang.org/grpc), cached in bench/.cache.
//
//	grpc-backend -port 0 -name A
//
// Prints "grpc backend A listening on 127.0.0.1:PORT (count on 127.0.0.1:PORT2)" on
// stderr once both ports are bound.
// gRPC (h2c, prior knowledge) on PORT: grpc.health.v1.Health/Check -> SERVING, for
// any service name; Watch and List are left unimplemented.
// HTTP/1.1 on PORT2: GET /__count -> 200, the number of Check calls served so far.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"sync/atomic"
	"syscall"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

var served atomic.Int64

// health answers every Check with SERVING and counts it.
type health struct {
	healthpb.UnimplementedHealthServer
}

var serving = &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}

func (health) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	served.Add(1)
	return serving, nil
}

func main() {
	port := flag.Int("port", 0, "gRPC port to listen on (0: a free one)")
	name := flag.String("name", "backend", "name printed when listening")
	flag.Parse()

	fail := func(err error) {
		fmt.Fprintf(os.Stderr, "grpc backend %s: %v\n", *name, err)
		os.Exit(1)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *port))
	if err != nil {
		fail(err)
	}
	countLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail(err)
	}

	server := grpc.NewServer()
	healthpb.RegisterHealthServer(server, health{})

	mux := http.NewServeMux()
	mux.HandleFunc("/__count", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"text/plain"}
		w.Write([]byte(strconv.FormatInt(served.Load(), 10)))
	})
	go func() {
		if err := http.Serve(countLn, mux); err != nil {
			fail(err)
		}
	}()

	fmt.Fprintf(os.Stderr, "grpc backend %s listening on %s (count on %s)\n", *name, ln.Addr(), countLn.Addr())
	go func() {
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		<-stop
		os.Exit(0)
	}()
	if err := server.Serve(ln); err != nil {
		fail(err)
	}
}
