"""A griffe extension for the Python SDK's reference page (mkdocs.yml loads it).

``EpisodicClient``'s methods are written once, as flows in ``episodic.sdk.operations``, and
bound to the class as ``create_thread = _blocking(ops.create_thread)``; read statically, they
are attributes without a docstring. This turns each into the method a caller sees: the
flow's docstring and parameters without its client argument, returning what the flow
yields (``Flow[X]`` → ``X``).
"""

from __future__ import annotations

from typing import Any

import griffe

_DRIVERS = ("_blocking(ops.", "_blocking_stream(ops.")


class ClientMethods(griffe.Extension):
    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        if pkg.path != "episodic":
            return
        # Where the class and the flows are defined, not the modules that re-export them
        # (episodic.client, episodic.sdk.operations): an alias's members are the target's.
        client = pkg["sdk.client.EpisodicClient"]
        core = pkg["sdk"]  # what sdk/client.py binds as ``ops``
        bound = 0
        for name, member in list(client.members.items()):
            value = str(getattr(member, "value", ""))
            driver = next((d for d in _DRIVERS if value.startswith(d)), None)
            if not member.is_attribute or driver is None:
                continue
            flow = core[value[len(driver) : -1]]
            while flow.is_alias:
                flow = flow.final_target
            returns = flow.returns
            inner = getattr(returns, "slice", returns)
            if driver.startswith("_blocking_stream"):
                inner = f"Iterator[{inner}]"
            method = griffe.Function(
                name,
                lineno=member.lineno,
                endlineno=member.endlineno,
                parameters=griffe.Parameters(*list(flow.parameters)[1:]),
                returns=inner,
                docstring=griffe.Docstring(flow.docstring.value) if flow.docstring else None,
            )
            client.set_member(name, method)
            bound += 1
        if not bound:  # else the page would quietly list no method at all
            raise RuntimeError(
                "docs/_griffe/client_methods.py found no flow bound to EpisodicClient: "
                "did sdk/client.py or the flows move?"
            )
