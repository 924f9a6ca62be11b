"""Federation: peer sync by digests, weighted votes and supermajority consensus."""
