"""factnode: deterministic, explainable beliefs for AI agents, federated over gRPC."""

__version__ = "0.1.0"
