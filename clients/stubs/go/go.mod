// The generated Go stubs of the episodic.v1 contracts (package episodicv1). Consumers:
//   require episodic/stubs v0.0.0
//   replace episodic/stubs => <path to this folder>
// then `go mod tidy`. The versions below are those tests/test_contracts.py builds the stubs
// against (Debian bookworm's Go sources, offline); Go's version selection may pick newer.
module episodic/stubs

go 1.19

require (
	google.golang.org/grpc v1.33.3
	google.golang.org/protobuf v1.28.1
)
