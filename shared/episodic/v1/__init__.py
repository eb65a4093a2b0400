"""Generated protobuf and gRPC stubs for episodic.v1 (do not edit)."""
