"""The gRPC node: servicers, request decoding and checks, auth, error mapping and the
composition root (`app`).

One module per service (`_fact`, `_review`, `_admin`; the federation's is in
`factnode.federation.transport`), each thin: parse, authorise, call the ledger, convert.
`_decoding` registers every servicer with bytes-in handlers and decodes there, `_requests`
checks each request type against the API's documented rules, `_context` holds what the
servicers share, `_auth` the bearer tokens and `_errors` the status mapping.

May import the ledger, the federation, the store, the core and the generated API. The
package itself imports nothing, so the federation's transport can share the error mapping
(`_errors`) without pulling in the composition root that imports it: import `Node` and
`serve` from `factnode.server.app`.
"""
