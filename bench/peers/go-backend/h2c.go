//go:build go1.24

package main

import "net/http"

// h2c: HTTP/2 by prior knowledge in the clear on the same port as HTTP/1.1 (net/http
// tells them apart by the connection preface; Go 1.24 and later).
func enableH2C(server *http.Server) bool {
	server.Protocols = new(http.Protocols)
	server.Protocols.SetHTTP1(true)
	server.Protocols.SetUnencryptedHTTP2(true)
	return true
}
