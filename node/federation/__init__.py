"""Federation: peer sync by digests, weighted votes and supermajority consensus.

- `_digest`: bucketed set digests (XOR of item hashes) compared root first.
- `_index`: a ledger's digests, built from its store once and kept in step with its
  commits through `Ledger.on_commit`.
- `sync`: the anti-entropy rounds (`Syncer`) and the peer-facing endpoint.
- `transport`: the mTLS gRPC link and the FederationService servicer.

May import the ledger, the store's value types, the core, config and the generated API;
the ledger never imports the federation.
"""
