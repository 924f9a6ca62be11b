"""The gRPC node: servicers, auth, error mapping and the composition root."""

from factnode.server.app import Node, serve

__all__ = ["Node", "serve"]
