// The example as a module of its own, as a backend team would start one: the stubs are
// vendored by path (replace), the versions are those CI builds with (Debian bookworm's Go
// sources: tests/polyglot/test_go.py builds this offline in GOPATH mode). With the module
// proxy reachable, `go mod tidy` writes go.sum; Go's version selection may pick newer.
module episodic-example

go 1.19

require (
	episodic/stubs v0.0.0
	github.com/golang/protobuf v1.5.2
	google.golang.org/genproto v0.0.0-20200526211855-cb27e3aa2013
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)

replace episodic/stubs => ../../clients/stubs/go
