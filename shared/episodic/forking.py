"""Imported first by the processes of episodic that start children while gRPC calls are in
flight — the ``episodic`` command (``up`` starts the services and probes their health),
the test suite and the benches (``pg_ctl`` restarts the embedded database under load) —
to turn gRPC's fork handlers off before gRPC is imported.

Python's subprocess forks with fork(), not vfork(), whenever it must run code between the
fork and the exec (``user=``: pg_ctl runs as the embedded server's user). With gRPC's
fork support on (grpcio's default on Linux) its handlers then run while other threads
are inside calls. Measured on this code's machine (a thread pool making unary calls while
the main thread forks with ``user=``): the parent aborted in gRPC's poller
(``ev_epoll1_linux.cc: Check failed: next_worker->state == KICKED``) after ~600 forks
with calls failing on the way; with the handlers off, 720 forks and 19,588 calls without
an error. In the test suite the forked child died with SIGSEGV before exec'ing pg_ctl.
Our children exec at once and never use gRPC, the case fork support is not needed for.

Only where episodic's own entry points come first: an application that imports the SDK
keeps gRPC's default (it may use gRPC in forked children), and an explicit
``GRPC_ENABLE_FORK_SUPPORT`` wins.
"""

import os

os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
