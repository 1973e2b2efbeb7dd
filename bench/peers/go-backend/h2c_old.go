//go:build !go1.24

package main

import "net/http"

// Before Go 1.24 net/http has no h2c of its own: HTTP/1.1 only.
func enableH2C(server *http.Server) bool { return false }
