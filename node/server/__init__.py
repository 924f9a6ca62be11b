"""The gRPC node: servicers, auth, error mapping and the composition root (`app`).

May import the ledger, the federation, the store, the core and the generated API. The
package itself imports nothing, so the federation's transport can share the error mapping
(`_errors`) without pulling in the composition root that imports it: import `Node` and
`serve` from `factnode.server.app`.
"""
