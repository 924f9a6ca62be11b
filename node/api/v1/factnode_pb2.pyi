import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Outcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[Outcome]
    OUTCOME_REJECTED: _ClassVar[Outcome]
    OUTCOME_DUPLICATE: _ClassVar[Outcome]
    OUTCOME_CORROBORATED: _ClassVar[Outcome]
    OUTCOME_ACCEPTED: _ClassVar[Outcome]
    OUTCOME_SUPERSEDED: _ClassVar[Outcome]
    OUTCOME_HISTORICAL: _ClassVar[Outcome]
    OUTCOME_DISBELIEVED: _ClassVar[Outcome]
    OUTCOME_AMBIGUOUS: _ClassVar[Outcome]
    OUTCOME_RETRACTED: _ClassVar[Outcome]
    OUTCOME_RESOLVED: _ClassVar[Outcome]
    OUTCOME_CONTESTED: _ClassVar[Outcome]
    OUTCOME_ERASED: _ClassVar[Outcome]
    OUTCOME_DECAYED: _ClassVar[Outcome]
    OUTCOME_PURGED: _ClassVar[Outcome]

class BeliefState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    BELIEF_STATE_UNSPECIFIED: _ClassVar[BeliefState]
    BELIEF_STATE_BELIEVED: _ClassVar[BeliefState]
    BELIEF_STATE_AMBIGUOUS: _ClassVar[BeliefState]
    BELIEF_STATE_CONTESTED: _ClassVar[BeliefState]

class VersionStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERSION_STATUS_UNSPECIFIED: _ClassVar[VersionStatus]
    VERSION_STATUS_BELIEVED: _ClassVar[VersionStatus]
    VERSION_STATUS_AMBIGUOUS: _ClassVar[VersionStatus]
    VERSION_STATUS_HISTORICAL: _ClassVar[VersionStatus]
    VERSION_STATUS_DISBELIEVED: _ClassVar[VersionStatus]
    VERSION_STATUS_RETRACTED: _ClassVar[VersionStatus]
    VERSION_STATUS_CORRECTED: _ClassVar[VersionStatus]
    VERSION_STATUS_CONTESTED: _ClassVar[VersionStatus]
    VERSION_STATUS_DECAYED: _ClassVar[VersionStatus]

class DigestSet(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DIGEST_SET_UNSPECIFIED: _ClassVar[DigestSet]
    DIGEST_SET_EVIDENCE: _ClassVar[DigestSet]
    DIGEST_SET_TOMBSTONES: _ClassVar[DigestSet]
    DIGEST_SET_PEER_VOTES: _ClassVar[DigestSet]
    DIGEST_SET_YOUR_VOTES: _ClassVar[DigestSet]
    DIGEST_SET_VOTES: _ClassVar[DigestSet]
    DIGEST_SET_MEMBERS: _ClassVar[DigestSet]
    DIGEST_SET_RECEIPTS: _ClassVar[DigestSet]

class ErasureScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ERASURE_SCOPE_UNSPECIFIED: _ClassVar[ErasureScope]
    ERASURE_SCOPE_EVIDENCE: _ClassVar[ErasureScope]
    ERASURE_SCOPE_KEY: _ClassVar[ErasureScope]
    ERASURE_SCOPE_SUBJECT: _ClassVar[ErasureScope]
OUTCOME_UNSPECIFIED: Outcome
OUTCOME_REJECTED: Outcome
OUTCOME_DUPLICATE: Outcome
OUTCOME_CORROBORATED: Outcome
OUTCOME_ACCEPTED: Outcome
OUTCOME_SUPERSEDED: Outcome
OUTCOME_HISTORICAL: Outcome
OUTCOME_DISBELIEVED: Outcome
OUTCOME_AMBIGUOUS: Outcome
OUTCOME_RETRACTED: Outcome
OUTCOME_RESOLVED: Outcome
OUTCOME_CONTESTED: Outcome
OUTCOME_ERASED: Outcome
OUTCOME_DECAYED: Outcome
OUTCOME_PURGED: Outcome
BELIEF_STATE_UNSPECIFIED: BeliefState
BELIEF_STATE_BELIEVED: BeliefState
BELIEF_STATE_AMBIGUOUS: BeliefState
BELIEF_STATE_CONTESTED: BeliefState
VERSION_STATUS_UNSPECIFIED: VersionStatus
VERSION_STATUS_BELIEVED: VersionStatus
VERSION_STATUS_AMBIGUOUS: VersionStatus
VERSION_STATUS_HISTORICAL: VersionStatus
VERSION_STATUS_DISBELIEVED: VersionStatus
VERSION_STATUS_RETRACTED: VersionStatus
VERSION_STATUS_CORRECTED: VersionStatus
VERSION_STATUS_CONTESTED: VersionStatus
VERSION_STATUS_DECAYED: VersionStatus
DIGEST_SET_UNSPECIFIED: DigestSet
DIGEST_SET_EVIDENCE: DigestSet
DIGEST_SET_TOMBSTONES: DigestSet
DIGEST_SET_PEER_VOTES: DigestSet
DIGEST_SET_YOUR_VOTES: DigestSet
DIGEST_SET_VOTES: DigestSet
DIGEST_SET_MEMBERS: DigestSet
DIGEST_SET_RECEIPTS: DigestSet
ERASURE_SCOPE_UNSPECIFIED: ErasureScope
ERASURE_SCOPE_EVIDENCE: ErasureScope
ERASURE_SCOPE_KEY: ErasureScope
ERASURE_SCOPE_SUBJECT: ErasureScope

class Key(_message.Message):
    __slots__ = ("namespace", "subject", "predicate")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    subject: str
    predicate: str
    def __init__(self, namespace: _Optional[str] = ..., subject: _Optional[str] = ..., predicate: _Optional[str] = ...) -> None: ...

class FieldViolation(_message.Message):
    __slots__ = ("field", "description")
    FIELD_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    field: str
    description: str
    def __init__(self, field: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class Evidence(_message.Message):
    __slots__ = ("evidence_id", "key", "object", "version_id", "anchor", "source", "worth", "confidence", "valid_from", "valid_from_defaulted", "recorded_at", "origin_node", "corrects", "contradicts", "anchor_cap", "retracts")
    EVIDENCE_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    WORTH_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_DEFAULTED_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_NODE_FIELD_NUMBER: _ClassVar[int]
    CORRECTS_FIELD_NUMBER: _ClassVar[int]
    CONTRADICTS_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_CAP_FIELD_NUMBER: _ClassVar[int]
    RETRACTS_FIELD_NUMBER: _ClassVar[int]
    evidence_id: str
    key: Key
    object: str
    version_id: str
    anchor: str
    source: str
    worth: float
    confidence: float
    valid_from: _timestamp_pb2.Timestamp
    valid_from_defaulted: bool
    recorded_at: _timestamp_pb2.Timestamp
    origin_node: str
    corrects: str
    contradicts: Key
    anchor_cap: str
    retracts: bool
    def __init__(self, evidence_id: _Optional[str] = ..., key: _Optional[_Union[Key, _Mapping]] = ..., object: _Optional[str] = ..., version_id: _Optional[str] = ..., anchor: _Optional[str] = ..., source: _Optional[str] = ..., worth: _Optional[float] = ..., confidence: _Optional[float] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_from_defaulted: _Optional[bool] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., origin_node: _Optional[str] = ..., corrects: _Optional[str] = ..., contradicts: _Optional[_Union[Key, _Mapping]] = ..., anchor_cap: _Optional[str] = ..., retracts: _Optional[bool] = ...) -> None: ...

class Decision(_message.Message):
    __slots__ = ("key", "outcome", "rule", "decided_at", "evidence_id", "version_id", "supersedes", "detail", "seq")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    key: Key
    outcome: Outcome
    rule: str
    decided_at: _timestamp_pb2.Timestamp
    evidence_id: str
    version_id: str
    supersedes: str
    detail: str
    seq: int
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., outcome: _Optional[_Union[Outcome, str]] = ..., rule: _Optional[str] = ..., decided_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., evidence_id: _Optional[str] = ..., version_id: _Optional[str] = ..., supersedes: _Optional[str] = ..., detail: _Optional[str] = ..., seq: _Optional[int] = ...) -> None: ...

class BelievedValue(_message.Message):
    __slots__ = ("version_id", "object", "evidence")
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    version_id: str
    object: str
    evidence: Evidence
    def __init__(self, version_id: _Optional[str] = ..., object: _Optional[str] = ..., evidence: _Optional[_Union[Evidence, _Mapping]] = ...) -> None: ...

class VersionTally(_message.Message):
    __slots__ = ("version_id", "object", "weight", "share_milli", "voters", "local_belief", "local_rule")
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    WEIGHT_FIELD_NUMBER: _ClassVar[int]
    SHARE_MILLI_FIELD_NUMBER: _ClassVar[int]
    VOTERS_FIELD_NUMBER: _ClassVar[int]
    LOCAL_BELIEF_FIELD_NUMBER: _ClassVar[int]
    LOCAL_RULE_FIELD_NUMBER: _ClassVar[int]
    version_id: str
    object: str
    weight: int
    share_milli: int
    voters: _containers.RepeatedScalarFieldContainer[str]
    local_belief: bool
    local_rule: str
    def __init__(self, version_id: _Optional[str] = ..., object: _Optional[str] = ..., weight: _Optional[int] = ..., share_milli: _Optional[int] = ..., voters: _Optional[_Iterable[str]] = ..., local_belief: _Optional[bool] = ..., local_rule: _Optional[str] = ...) -> None: ...

class Belief(_message.Message):
    __slots__ = ("key", "version_id", "object", "state", "rule", "evidence", "believed_values", "tallies", "consensus_threshold", "first_recorded_at", "last_recorded_at")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    BELIEVED_VALUES_FIELD_NUMBER: _ClassVar[int]
    TALLIES_FIELD_NUMBER: _ClassVar[int]
    CONSENSUS_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    FIRST_RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    key: Key
    version_id: str
    object: str
    state: BeliefState
    rule: str
    evidence: Evidence
    believed_values: _containers.RepeatedCompositeFieldContainer[BelievedValue]
    tallies: _containers.RepeatedCompositeFieldContainer[VersionTally]
    consensus_threshold: ConsensusThreshold
    first_recorded_at: _timestamp_pb2.Timestamp
    last_recorded_at: _timestamp_pb2.Timestamp
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., version_id: _Optional[str] = ..., object: _Optional[str] = ..., state: _Optional[_Union[BeliefState, str]] = ..., rule: _Optional[str] = ..., evidence: _Optional[_Union[Evidence, _Mapping]] = ..., believed_values: _Optional[_Iterable[_Union[BelievedValue, _Mapping]]] = ..., tallies: _Optional[_Iterable[_Union[VersionTally, _Mapping]]] = ..., consensus_threshold: _Optional[_Union[ConsensusThreshold, _Mapping]] = ..., first_recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ConsensusThreshold(_message.Message):
    __slots__ = ("numerator", "denominator")
    NUMERATOR_FIELD_NUMBER: _ClassVar[int]
    DENOMINATOR_FIELD_NUMBER: _ClassVar[int]
    numerator: int
    denominator: int
    def __init__(self, numerator: _Optional[int] = ..., denominator: _Optional[int] = ...) -> None: ...

class FactInput(_message.Message):
    __slots__ = ("key", "object", "anchor", "source", "worth", "confidence", "valid_from", "corrects", "contradicts")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    WORTH_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    CORRECTS_FIELD_NUMBER: _ClassVar[int]
    CONTRADICTS_FIELD_NUMBER: _ClassVar[int]
    key: Key
    object: str
    anchor: str
    source: str
    worth: float
    confidence: float
    valid_from: _timestamp_pb2.Timestamp
    corrects: str
    contradicts: Key
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., object: _Optional[str] = ..., anchor: _Optional[str] = ..., source: _Optional[str] = ..., worth: _Optional[float] = ..., confidence: _Optional[float] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., corrects: _Optional[str] = ..., contradicts: _Optional[_Union[Key, _Mapping]] = ...) -> None: ...

class SubmitFactRequest(_message.Message):
    __slots__ = ("fact", "idempotency_key", "all_or_nothing", "embeddings")
    FACT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ALL_OR_NOTHING_FIELD_NUMBER: _ClassVar[int]
    EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    fact: FactInput
    idempotency_key: str
    all_or_nothing: bool
    embeddings: _containers.RepeatedCompositeFieldContainer[Embedding]
    def __init__(self, fact: _Optional[_Union[FactInput, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., all_or_nothing: _Optional[bool] = ..., embeddings: _Optional[_Iterable[_Union[Embedding, _Mapping]]] = ...) -> None: ...

class Embedding(_message.Message):
    __slots__ = ("space", "values")
    SPACE_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    space: str
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, space: _Optional[str] = ..., values: _Optional[_Iterable[float]] = ...) -> None: ...

class SubmitFactResponse(_message.Message):
    __slots__ = ("decision", "evidence_id", "version_id", "belief")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    BELIEF_FIELD_NUMBER: _ClassVar[int]
    decision: Decision
    evidence_id: str
    version_id: str
    belief: Belief
    def __init__(self, decision: _Optional[_Union[Decision, _Mapping]] = ..., evidence_id: _Optional[str] = ..., version_id: _Optional[str] = ..., belief: _Optional[_Union[Belief, _Mapping]] = ...) -> None: ...

class ItemError(_message.Message):
    __slots__ = ("code", "message", "field_violations")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    FIELD_VIOLATIONS_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    field_violations: _containers.RepeatedCompositeFieldContainer[FieldViolation]
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., field_violations: _Optional[_Iterable[_Union[FieldViolation, _Mapping]]] = ...) -> None: ...

class ItemResult(_message.Message):
    __slots__ = ("index", "decision", "error")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    index: int
    decision: Decision
    error: ItemError
    def __init__(self, index: _Optional[int] = ..., decision: _Optional[_Union[Decision, _Mapping]] = ..., error: _Optional[_Union[ItemError, _Mapping]] = ...) -> None: ...

class SubmitFactsResponse(_message.Message):
    __slots__ = ("results", "decided_count", "invalid_count")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    DECIDED_COUNT_FIELD_NUMBER: _ClassVar[int]
    INVALID_COUNT_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ItemResult]
    decided_count: int
    invalid_count: int
    def __init__(self, results: _Optional[_Iterable[_Union[ItemResult, _Mapping]]] = ..., decided_count: _Optional[int] = ..., invalid_count: _Optional[int] = ...) -> None: ...

class GetBeliefRequest(_message.Message):
    __slots__ = ("key", "as_of", "known_at")
    KEY_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    key: Key
    as_of: _timestamp_pb2.Timestamp
    known_at: _timestamp_pb2.Timestamp
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListBeliefsRequest(_message.Message):
    __slots__ = ("namespace", "subject", "page_size", "page_token", "subject_prefix")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_PREFIX_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    subject: str
    page_size: int
    page_token: str
    subject_prefix: str
    def __init__(self, namespace: _Optional[str] = ..., subject: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., subject_prefix: _Optional[str] = ...) -> None: ...

class ListSubjectsRequest(_message.Message):
    __slots__ = ("namespace", "subject_prefix", "page_size", "page_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    subject_prefix: str
    page_size: int
    page_token: str
    def __init__(self, namespace: _Optional[str] = ..., subject_prefix: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSubjectsResponse(_message.Message):
    __slots__ = ("subjects", "next_page_token")
    SUBJECTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    subjects: _containers.RepeatedScalarFieldContainer[str]
    next_page_token: str
    def __init__(self, subjects: _Optional[_Iterable[str]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListBeliefsResponse(_message.Message):
    __slots__ = ("beliefs", "next_page_token")
    BELIEFS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    beliefs: _containers.RepeatedCompositeFieldContainer[Belief]
    next_page_token: str
    def __init__(self, beliefs: _Optional[_Iterable[_Union[Belief, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetHistoryRequest(_message.Message):
    __slots__ = ("key", "known_at")
    KEY_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    key: Key
    known_at: _timestamp_pb2.Timestamp
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Interval(_message.Message):
    __slots__ = ("start", "end")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    start: _timestamp_pb2.Timestamp
    end: _timestamp_pb2.Timestamp
    def __init__(self, start: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class VersionHistory(_message.Message):
    __slots__ = ("version_id", "object", "status", "intervals", "evidence", "supersedes", "superseded_by", "ended_by", "rule", "served_until", "decayed_at", "confirmed_at")
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    INTERVALS_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    ENDED_BY_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    SERVED_UNTIL_FIELD_NUMBER: _ClassVar[int]
    DECAYED_AT_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_AT_FIELD_NUMBER: _ClassVar[int]
    version_id: str
    object: str
    status: VersionStatus
    intervals: _containers.RepeatedCompositeFieldContainer[Interval]
    evidence: _containers.RepeatedCompositeFieldContainer[Evidence]
    supersedes: _containers.RepeatedScalarFieldContainer[str]
    superseded_by: _containers.RepeatedScalarFieldContainer[str]
    ended_by: _containers.RepeatedCompositeFieldContainer[Evidence]
    rule: str
    served_until: _timestamp_pb2.Timestamp
    decayed_at: _timestamp_pb2.Timestamp
    confirmed_at: _timestamp_pb2.Timestamp
    def __init__(self, version_id: _Optional[str] = ..., object: _Optional[str] = ..., status: _Optional[_Union[VersionStatus, str]] = ..., intervals: _Optional[_Iterable[_Union[Interval, _Mapping]]] = ..., evidence: _Optional[_Iterable[_Union[Evidence, _Mapping]]] = ..., supersedes: _Optional[_Iterable[str]] = ..., superseded_by: _Optional[_Iterable[str]] = ..., ended_by: _Optional[_Iterable[_Union[Evidence, _Mapping]]] = ..., rule: _Optional[str] = ..., served_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., decayed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., confirmed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetHistoryResponse(_message.Message):
    __slots__ = ("key", "versions")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    key: Key
    versions: _containers.RepeatedCompositeFieldContainer[VersionHistory]
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., versions: _Optional[_Iterable[_Union[VersionHistory, _Mapping]]] = ...) -> None: ...

class ExplainRequest(_message.Message):
    __slots__ = ("key", "as_of", "known_at")
    KEY_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    key: Key
    as_of: _timestamp_pb2.Timestamp
    known_at: _timestamp_pb2.Timestamp
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Comparison(_message.Message):
    __slots__ = ("version_id", "object", "rule", "reason", "winner_evidence", "loser_evidence", "evidence_rule", "evidence_reason")
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    RULE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    WINNER_EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    LOSER_EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_RULE_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_REASON_FIELD_NUMBER: _ClassVar[int]
    version_id: str
    object: str
    rule: str
    reason: str
    winner_evidence: Evidence
    loser_evidence: Evidence
    evidence_rule: str
    evidence_reason: str
    def __init__(self, version_id: _Optional[str] = ..., object: _Optional[str] = ..., rule: _Optional[str] = ..., reason: _Optional[str] = ..., winner_evidence: _Optional[_Union[Evidence, _Mapping]] = ..., loser_evidence: _Optional[_Union[Evidence, _Mapping]] = ..., evidence_rule: _Optional[str] = ..., evidence_reason: _Optional[str] = ...) -> None: ...

class BelievedAgain(_message.Message):
    __slots__ = ("key", "version_id", "object", "cause", "text", "ended_by")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    CAUSE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ENDED_BY_FIELD_NUMBER: _ClassVar[int]
    key: Key
    version_id: str
    object: str
    cause: str
    text: str
    ended_by: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., version_id: _Optional[str] = ..., object: _Optional[str] = ..., cause: _Optional[str] = ..., text: _Optional[str] = ..., ended_by: _Optional[_Iterable[str]] = ...) -> None: ...

class ExplainResponse(_message.Message):
    __slots__ = ("belief", "comparisons", "review", "believed_again")
    BELIEF_FIELD_NUMBER: _ClassVar[int]
    COMPARISONS_FIELD_NUMBER: _ClassVar[int]
    REVIEW_FIELD_NUMBER: _ClassVar[int]
    BELIEVED_AGAIN_FIELD_NUMBER: _ClassVar[int]
    belief: Belief
    comparisons: _containers.RepeatedCompositeFieldContainer[Comparison]
    review: str
    believed_again: BelievedAgain
    def __init__(self, belief: _Optional[_Union[Belief, _Mapping]] = ..., comparisons: _Optional[_Iterable[_Union[Comparison, _Mapping]]] = ..., review: _Optional[str] = ..., believed_again: _Optional[_Union[BelievedAgain, _Mapping]] = ...) -> None: ...

class RetractRequest(_message.Message):
    __slots__ = ("key", "object", "at", "reason", "anchor", "source", "worth", "confidence")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    WORTH_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    key: Key
    object: str
    at: _timestamp_pb2.Timestamp
    reason: str
    anchor: str
    source: str
    worth: float
    confidence: float
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., object: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., reason: _Optional[str] = ..., anchor: _Optional[str] = ..., source: _Optional[str] = ..., worth: _Optional[float] = ..., confidence: _Optional[float] = ...) -> None: ...

class RetractResponse(_message.Message):
    __slots__ = ("decision", "belief", "believed_again")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    BELIEF_FIELD_NUMBER: _ClassVar[int]
    BELIEVED_AGAIN_FIELD_NUMBER: _ClassVar[int]
    decision: Decision
    belief: Belief
    believed_again: BelievedAgain
    def __init__(self, decision: _Optional[_Union[Decision, _Mapping]] = ..., belief: _Optional[_Union[Belief, _Mapping]] = ..., believed_again: _Optional[_Union[BelievedAgain, _Mapping]] = ...) -> None: ...

class ListDecisionsRequest(_message.Message):
    __slots__ = ("key", "namespace", "page_size", "page_token")
    KEY_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    key: Key
    namespace: str
    page_size: int
    page_token: str
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., namespace: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListDecisionsResponse(_message.Message):
    __slots__ = ("decisions", "next_page_token")
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    decisions: _containers.RepeatedCompositeFieldContainer[Decision]
    next_page_token: str
    def __init__(self, decisions: _Optional[_Iterable[_Union[Decision, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SearchBeliefsRequest(_message.Message):
    __slots__ = ("query", "namespace_prefix", "subject", "predicate", "states", "anchors", "as_of", "known_at", "page_size", "page_token", "embedding")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_PREFIX_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    ANCHORS_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_FIELD_NUMBER: _ClassVar[int]
    query: str
    namespace_prefix: str
    subject: str
    predicate: str
    states: _containers.RepeatedScalarFieldContainer[BeliefState]
    anchors: _containers.RepeatedScalarFieldContainer[str]
    as_of: _timestamp_pb2.Timestamp
    known_at: _timestamp_pb2.Timestamp
    page_size: int
    page_token: str
    embedding: Embedding
    def __init__(self, query: _Optional[str] = ..., namespace_prefix: _Optional[str] = ..., subject: _Optional[str] = ..., predicate: _Optional[str] = ..., states: _Optional[_Iterable[_Union[BeliefState, str]]] = ..., anchors: _Optional[_Iterable[str]] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., embedding: _Optional[_Union[Embedding, _Mapping]] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("belief", "version_id", "object", "anchor", "score", "first_recorded_at", "last_recorded_at")
    BELIEF_FIELD_NUMBER: _ClassVar[int]
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    FIRST_RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    LAST_RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    belief: Belief
    version_id: str
    object: str
    anchor: str
    score: float
    first_recorded_at: _timestamp_pb2.Timestamp
    last_recorded_at: _timestamp_pb2.Timestamp
    def __init__(self, belief: _Optional[_Union[Belief, _Mapping]] = ..., version_id: _Optional[str] = ..., object: _Optional[str] = ..., anchor: _Optional[str] = ..., score: _Optional[float] = ..., first_recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SearchBeliefsResponse(_message.Message):
    __slots__ = ("hits", "next_page_token")
    HITS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    next_page_token: str
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchBeliefsRequest(_message.Message):
    __slots__ = ("namespace", "resume_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    resume_token: str
    def __init__(self, namespace: _Optional[str] = ..., resume_token: _Optional[str] = ...) -> None: ...

class BeliefChange(_message.Message):
    __slots__ = ("key", "belief", "decision", "resume_token")
    KEY_FIELD_NUMBER: _ClassVar[int]
    BELIEF_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    RESUME_TOKEN_FIELD_NUMBER: _ClassVar[int]
    key: Key
    belief: Belief
    decision: Decision
    resume_token: str
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., belief: _Optional[_Union[Belief, _Mapping]] = ..., decision: _Optional[_Union[Decision, _Mapping]] = ..., resume_token: _Optional[str] = ...) -> None: ...

class ContestedKey(_message.Message):
    __slots__ = ("key", "state", "served_version_id", "detail", "versions", "consensus_threshold")
    KEY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SERVED_VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    CONSENSUS_THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    key: Key
    state: BeliefState
    served_version_id: str
    detail: str
    versions: _containers.RepeatedCompositeFieldContainer[VersionTally]
    consensus_threshold: ConsensusThreshold
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., state: _Optional[_Union[BeliefState, str]] = ..., served_version_id: _Optional[str] = ..., detail: _Optional[str] = ..., versions: _Optional[_Iterable[_Union[VersionTally, _Mapping]]] = ..., consensus_threshold: _Optional[_Union[ConsensusThreshold, _Mapping]] = ...) -> None: ...

class ListContestedRequest(_message.Message):
    __slots__ = ("namespace", "page_size", "page_token")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    page_size: int
    page_token: str
    def __init__(self, namespace: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListContestedResponse(_message.Message):
    __slots__ = ("keys", "next_page_token")
    KEYS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    keys: _containers.RepeatedCompositeFieldContainer[ContestedKey]
    next_page_token: str
    def __init__(self, keys: _Optional[_Iterable[_Union[ContestedKey, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetContestedRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: Key
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ...) -> None: ...

class ResolveContestedRequest(_message.Message):
    __slots__ = ("key", "version_id", "object", "reason", "operator")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    key: Key
    version_id: str
    object: str
    reason: str
    operator: str
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., version_id: _Optional[str] = ..., object: _Optional[str] = ..., reason: _Optional[str] = ..., operator: _Optional[str] = ...) -> None: ...

class ResolveContestedResponse(_message.Message):
    __slots__ = ("decision", "belief", "note")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    BELIEF_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    decision: Decision
    belief: Belief
    note: str
    def __init__(self, decision: _Optional[_Union[Decision, _Mapping]] = ..., belief: _Optional[_Union[Belief, _Mapping]] = ..., note: _Optional[str] = ...) -> None: ...

class SubjectScope(_message.Message):
    __slots__ = ("namespace", "subject")
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    namespace: str
    subject: str
    def __init__(self, namespace: _Optional[str] = ..., subject: _Optional[str] = ...) -> None: ...

class EraseRequest(_message.Message):
    __slots__ = ("evidence_id", "key", "subject", "reason", "operator")
    EVIDENCE_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    evidence_id: str
    key: Key
    subject: SubjectScope
    reason: str
    operator: str
    def __init__(self, evidence_id: _Optional[str] = ..., key: _Optional[_Union[Key, _Mapping]] = ..., subject: _Optional[_Union[SubjectScope, _Mapping]] = ..., reason: _Optional[str] = ..., operator: _Optional[str] = ...) -> None: ...

class EraseResponse(_message.Message):
    __slots__ = ("erasure_id", "evidence_erased", "keys_affected", "erased_at", "believed_again")
    ERASURE_ID_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_ERASED_FIELD_NUMBER: _ClassVar[int]
    KEYS_AFFECTED_FIELD_NUMBER: _ClassVar[int]
    ERASED_AT_FIELD_NUMBER: _ClassVar[int]
    BELIEVED_AGAIN_FIELD_NUMBER: _ClassVar[int]
    erasure_id: str
    evidence_erased: int
    keys_affected: int
    erased_at: _timestamp_pb2.Timestamp
    believed_again: _containers.RepeatedCompositeFieldContainer[BelievedAgain]
    def __init__(self, erasure_id: _Optional[str] = ..., evidence_erased: _Optional[int] = ..., keys_affected: _Optional[int] = ..., erased_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., believed_again: _Optional[_Iterable[_Union[BelievedAgain, _Mapping]]] = ...) -> None: ...

class ListErasuresRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListErasuresResponse(_message.Message):
    __slots__ = ("erasures", "next_page_token")
    ERASURES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    erasures: _containers.RepeatedCompositeFieldContainer[ErasureCoverage]
    next_page_token: str
    def __init__(self, erasures: _Optional[_Iterable[_Union[ErasureCoverage, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetErasureRequest(_message.Message):
    __slots__ = ("erasure_id",)
    ERASURE_ID_FIELD_NUMBER: _ClassVar[int]
    erasure_id: str
    def __init__(self, erasure_id: _Optional[str] = ...) -> None: ...

class ErasureCoverage(_message.Message):
    __slots__ = ("erasure_id", "scope", "erased_at", "operator", "reason", "origin_node", "receipts", "waiting", "revoked", "complete", "summary")
    ERASURE_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    ERASED_AT_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_NODE_FIELD_NUMBER: _ClassVar[int]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    erasure_id: str
    scope: str
    erased_at: _timestamp_pb2.Timestamp
    operator: str
    reason: str
    origin_node: str
    receipts: _containers.RepeatedCompositeFieldContainer[ErasureReceipt]
    waiting: _containers.RepeatedScalarFieldContainer[str]
    revoked: _containers.RepeatedScalarFieldContainer[str]
    complete: bool
    summary: str
    def __init__(self, erasure_id: _Optional[str] = ..., scope: _Optional[str] = ..., erased_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., operator: _Optional[str] = ..., reason: _Optional[str] = ..., origin_node: _Optional[str] = ..., receipts: _Optional[_Iterable[_Union[ErasureReceipt, _Mapping]]] = ..., waiting: _Optional[_Iterable[str]] = ..., revoked: _Optional[_Iterable[str]] = ..., complete: _Optional[bool] = ..., summary: _Optional[str] = ...) -> None: ...

class RunDecayRequest(_message.Message):
    __slots__ = ("now",)
    NOW_FIELD_NUMBER: _ClassVar[int]
    now: _timestamp_pb2.Timestamp
    def __init__(self, now: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class RunDecayResponse(_message.Message):
    __slots__ = ("decayed", "tombstoned")
    DECAYED_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONED_FIELD_NUMBER: _ClassVar[int]
    decayed: int
    tombstoned: int
    def __init__(self, decayed: _Optional[int] = ..., tombstoned: _Optional[int] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatusCounts(_message.Message):
    __slots__ = ("evidence", "keys", "decisions", "contested", "ambiguous", "rejected", "quarantined")
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    CONTESTED_FIELD_NUMBER: _ClassVar[int]
    AMBIGUOUS_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    QUARANTINED_FIELD_NUMBER: _ClassVar[int]
    evidence: int
    keys: int
    decisions: int
    contested: int
    ambiguous: int
    rejected: int
    quarantined: int
    def __init__(self, evidence: _Optional[int] = ..., keys: _Optional[int] = ..., decisions: _Optional[int] = ..., contested: _Optional[int] = ..., ambiguous: _Optional[int] = ..., rejected: _Optional[int] = ..., quarantined: _Optional[int] = ...) -> None: ...

class QuarantinedItem(_message.Message):
    __slots__ = ("evidence_id", "key", "field", "reason")
    EVIDENCE_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    evidence_id: str
    key: Key
    field: str
    reason: str
    def __init__(self, evidence_id: _Optional[str] = ..., key: _Optional[_Union[Key, _Mapping]] = ..., field: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class PeerStatus(_message.Message):
    __slots__ = ("node_id", "address", "last_sync", "lag_seconds", "last_error", "max_anchor", "clock_skew_ms")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LAST_SYNC_FIELD_NUMBER: _ClassVar[int]
    LAG_SECONDS_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    MAX_ANCHOR_FIELD_NUMBER: _ClassVar[int]
    CLOCK_SKEW_MS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    last_sync: _timestamp_pb2.Timestamp
    lag_seconds: int
    last_error: str
    max_anchor: str
    clock_skew_ms: int
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., last_sync: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., lag_seconds: _Optional[int] = ..., last_error: _Optional[str] = ..., max_anchor: _Optional[str] = ..., clock_skew_ms: _Optional[int] = ...) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("node_id", "version", "listen_address", "database", "counts", "peers", "members", "replica", "lease_holder", "quarantined")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LISTEN_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    COUNTS_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    LEASE_HOLDER_FIELD_NUMBER: _ClassVar[int]
    QUARANTINED_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    version: str
    listen_address: str
    database: str
    counts: StatusCounts
    peers: _containers.RepeatedCompositeFieldContainer[PeerStatus]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    replica: str
    lease_holder: str
    quarantined: _containers.RepeatedCompositeFieldContainer[QuarantinedItem]
    def __init__(self, node_id: _Optional[str] = ..., version: _Optional[str] = ..., listen_address: _Optional[str] = ..., database: _Optional[str] = ..., counts: _Optional[_Union[StatusCounts, _Mapping]] = ..., peers: _Optional[_Iterable[_Union[PeerStatus, _Mapping]]] = ..., members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., replica: _Optional[str] = ..., lease_holder: _Optional[str] = ..., quarantined: _Optional[_Iterable[_Union[QuarantinedItem, _Mapping]]] = ...) -> None: ...

class SyncNowRequest(_message.Message):
    __slots__ = ("peer_node_id",)
    PEER_NODE_ID_FIELD_NUMBER: _ClassVar[int]
    peer_node_id: str
    def __init__(self, peer_node_id: _Optional[str] = ...) -> None: ...

class PeerSyncResult(_message.Message):
    __slots__ = ("node_id", "address", "ok", "error", "differing_buckets", "evidence_received", "evidence_sent", "votes_received", "votes_sent", "tombstones_received", "tombstones_sent", "clock_skew_ms")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DIFFERING_BUCKETS_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_SENT_FIELD_NUMBER: _ClassVar[int]
    VOTES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    VOTES_SENT_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONES_RECEIVED_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONES_SENT_FIELD_NUMBER: _ClassVar[int]
    CLOCK_SKEW_MS_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    ok: bool
    error: str
    differing_buckets: int
    evidence_received: int
    evidence_sent: int
    votes_received: int
    votes_sent: int
    tombstones_received: int
    tombstones_sent: int
    clock_skew_ms: int
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., ok: _Optional[bool] = ..., error: _Optional[str] = ..., differing_buckets: _Optional[int] = ..., evidence_received: _Optional[int] = ..., evidence_sent: _Optional[int] = ..., votes_received: _Optional[int] = ..., votes_sent: _Optional[int] = ..., tombstones_received: _Optional[int] = ..., tombstones_sent: _Optional[int] = ..., clock_skew_ms: _Optional[int] = ...) -> None: ...

class SyncNowResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[PeerSyncResult]
    def __init__(self, results: _Optional[_Iterable[_Union[PeerSyncResult, _Mapping]]] = ...) -> None: ...

class BucketRef(_message.Message):
    __slots__ = ("set", "prefix")
    SET_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    set: DigestSet
    prefix: str
    def __init__(self, set: _Optional[_Union[DigestSet, str]] = ..., prefix: _Optional[str] = ...) -> None: ...

class Bucket(_message.Message):
    __slots__ = ("set", "prefix", "hash", "count")
    SET_FIELD_NUMBER: _ClassVar[int]
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    set: DigestSet
    prefix: str
    hash: bytes
    count: int
    def __init__(self, set: _Optional[_Union[DigestSet, str]] = ..., prefix: _Optional[str] = ..., hash: _Optional[bytes] = ..., count: _Optional[int] = ...) -> None: ...

class DigestRequest(_message.Message):
    __slots__ = ("buckets", "depth", "sent_at", "revocation_list_number")
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    SENT_AT_FIELD_NUMBER: _ClassVar[int]
    REVOCATION_LIST_NUMBER_FIELD_NUMBER: _ClassVar[int]
    buckets: _containers.RepeatedCompositeFieldContainer[BucketRef]
    depth: int
    sent_at: _timestamp_pb2.Timestamp
    revocation_list_number: int
    def __init__(self, buckets: _Optional[_Iterable[_Union[BucketRef, _Mapping]]] = ..., depth: _Optional[int] = ..., sent_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revocation_list_number: _Optional[int] = ...) -> None: ...

class Digest(_message.Message):
    __slots__ = ("buckets", "unanswered", "answered_at", "revocation_list", "revocation_list_number")
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    UNANSWERED_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_AT_FIELD_NUMBER: _ClassVar[int]
    REVOCATION_LIST_FIELD_NUMBER: _ClassVar[int]
    REVOCATION_LIST_NUMBER_FIELD_NUMBER: _ClassVar[int]
    buckets: _containers.RepeatedCompositeFieldContainer[Bucket]
    unanswered: _containers.RepeatedCompositeFieldContainer[BucketRef]
    answered_at: _timestamp_pb2.Timestamp
    revocation_list: bytes
    revocation_list_number: int
    def __init__(self, buckets: _Optional[_Iterable[_Union[Bucket, _Mapping]]] = ..., unanswered: _Optional[_Iterable[_Union[BucketRef, _Mapping]]] = ..., answered_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revocation_list: _Optional[bytes] = ..., revocation_list_number: _Optional[int] = ...) -> None: ...

class DeltaRequest(_message.Message):
    __slots__ = ("buckets", "have_ids")
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    HAVE_IDS_FIELD_NUMBER: _ClassVar[int]
    buckets: _containers.RepeatedCompositeFieldContainer[BucketRef]
    have_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, buckets: _Optional[_Iterable[_Union[BucketRef, _Mapping]]] = ..., have_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class RelayedEvidence(_message.Message):
    __slots__ = ("evidence_id", "key", "object", "anchor", "source", "worth_milli", "confidence_milli", "valid_from", "valid_from_defaulted", "recorded_at", "origin_node", "corrects", "contradicts", "anchor_cap", "retracts", "signature")
    EVIDENCE_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    WORTH_MILLI_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_MILLI_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_DEFAULTED_FIELD_NUMBER: _ClassVar[int]
    RECORDED_AT_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_NODE_FIELD_NUMBER: _ClassVar[int]
    CORRECTS_FIELD_NUMBER: _ClassVar[int]
    CONTRADICTS_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_CAP_FIELD_NUMBER: _ClassVar[int]
    RETRACTS_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    evidence_id: str
    key: Key
    object: str
    anchor: str
    source: str
    worth_milli: int
    confidence_milli: int
    valid_from: _timestamp_pb2.Timestamp
    valid_from_defaulted: bool
    recorded_at: _timestamp_pb2.Timestamp
    origin_node: str
    corrects: str
    contradicts: Key
    anchor_cap: str
    retracts: bool
    signature: bytes
    def __init__(self, evidence_id: _Optional[str] = ..., key: _Optional[_Union[Key, _Mapping]] = ..., object: _Optional[str] = ..., anchor: _Optional[str] = ..., source: _Optional[str] = ..., worth_milli: _Optional[int] = ..., confidence_milli: _Optional[int] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_from_defaulted: _Optional[bool] = ..., recorded_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., origin_node: _Optional[str] = ..., corrects: _Optional[str] = ..., contradicts: _Optional[_Union[Key, _Mapping]] = ..., anchor_cap: _Optional[str] = ..., retracts: _Optional[bool] = ..., signature: _Optional[bytes] = ...) -> None: ...

class Vote(_message.Message):
    __slots__ = ("key", "version_id", "evidence_id", "anchor", "worth_milli", "fresh_since", "cast_at", "voter", "seq", "signature")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VERSION_ID_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_ID_FIELD_NUMBER: _ClassVar[int]
    ANCHOR_FIELD_NUMBER: _ClassVar[int]
    WORTH_MILLI_FIELD_NUMBER: _ClassVar[int]
    FRESH_SINCE_FIELD_NUMBER: _ClassVar[int]
    CAST_AT_FIELD_NUMBER: _ClassVar[int]
    VOTER_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    key: Key
    version_id: str
    evidence_id: str
    anchor: int
    worth_milli: int
    fresh_since: _timestamp_pb2.Timestamp
    cast_at: _timestamp_pb2.Timestamp
    voter: str
    seq: int
    signature: bytes
    def __init__(self, key: _Optional[_Union[Key, _Mapping]] = ..., version_id: _Optional[str] = ..., evidence_id: _Optional[str] = ..., anchor: _Optional[int] = ..., worth_milli: _Optional[int] = ..., fresh_since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., cast_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., voter: _Optional[str] = ..., seq: _Optional[int] = ..., signature: _Optional[bytes] = ...) -> None: ...

class ErasureTombstone(_message.Message):
    __slots__ = ("erasure_id", "scope", "scope_hash", "erased_at", "evidence_ids", "operator", "reason", "origin_node", "signature")
    ERASURE_ID_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_HASH_FIELD_NUMBER: _ClassVar[int]
    ERASED_AT_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_IDS_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_NODE_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    erasure_id: str
    scope: ErasureScope
    scope_hash: str
    erased_at: _timestamp_pb2.Timestamp
    evidence_ids: _containers.RepeatedScalarFieldContainer[str]
    operator: str
    reason: str
    origin_node: str
    signature: bytes
    def __init__(self, erasure_id: _Optional[str] = ..., scope: _Optional[_Union[ErasureScope, str]] = ..., scope_hash: _Optional[str] = ..., erased_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., evidence_ids: _Optional[_Iterable[str]] = ..., operator: _Optional[str] = ..., reason: _Optional[str] = ..., origin_node: _Optional[str] = ..., signature: _Optional[bytes] = ...) -> None: ...

class Delta(_message.Message):
    __slots__ = ("tombstones", "evidence", "votes", "votes_complete_under", "unanswered", "revocation_list", "certificates", "members", "erasure_bounds", "wanted_votes", "votes_marked", "confirmations", "erasure_receipts")
    TOMBSTONES_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    VOTES_FIELD_NUMBER: _ClassVar[int]
    VOTES_COMPLETE_UNDER_FIELD_NUMBER: _ClassVar[int]
    UNANSWERED_FIELD_NUMBER: _ClassVar[int]
    REVOCATION_LIST_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATES_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    ERASURE_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    WANTED_VOTES_FIELD_NUMBER: _ClassVar[int]
    VOTES_MARKED_FIELD_NUMBER: _ClassVar[int]
    CONFIRMATIONS_FIELD_NUMBER: _ClassVar[int]
    ERASURE_RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    tombstones: _containers.RepeatedCompositeFieldContainer[ErasureTombstone]
    evidence: _containers.RepeatedCompositeFieldContainer[RelayedEvidence]
    votes: _containers.RepeatedCompositeFieldContainer[Vote]
    votes_complete_under: _containers.RepeatedScalarFieldContainer[str]
    unanswered: _containers.RepeatedCompositeFieldContainer[BucketRef]
    revocation_list: bytes
    certificates: _containers.RepeatedScalarFieldContainer[bytes]
    members: _containers.RepeatedCompositeFieldContainer[MemberRecord]
    erasure_bounds: _containers.RepeatedCompositeFieldContainer[ErasureBound]
    wanted_votes: _containers.RepeatedScalarFieldContainer[str]
    votes_marked: bool
    confirmations: _containers.RepeatedCompositeFieldContainer[Confirmation]
    erasure_receipts: _containers.RepeatedCompositeFieldContainer[ErasureReceipt]
    def __init__(self, tombstones: _Optional[_Iterable[_Union[ErasureTombstone, _Mapping]]] = ..., evidence: _Optional[_Iterable[_Union[RelayedEvidence, _Mapping]]] = ..., votes: _Optional[_Iterable[_Union[Vote, _Mapping]]] = ..., votes_complete_under: _Optional[_Iterable[str]] = ..., unanswered: _Optional[_Iterable[_Union[BucketRef, _Mapping]]] = ..., revocation_list: _Optional[bytes] = ..., certificates: _Optional[_Iterable[bytes]] = ..., members: _Optional[_Iterable[_Union[MemberRecord, _Mapping]]] = ..., erasure_bounds: _Optional[_Iterable[_Union[ErasureBound, _Mapping]]] = ..., wanted_votes: _Optional[_Iterable[str]] = ..., votes_marked: _Optional[bool] = ..., confirmations: _Optional[_Iterable[_Union[Confirmation, _Mapping]]] = ..., erasure_receipts: _Optional[_Iterable[_Union[ErasureReceipt, _Mapping]]] = ...) -> None: ...

class Confirmation(_message.Message):
    __slots__ = ("evidence_id", "signer", "confirmed_at", "signature")
    EVIDENCE_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNER_FIELD_NUMBER: _ClassVar[int]
    CONFIRMED_AT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    evidence_id: str
    signer: str
    confirmed_at: _timestamp_pb2.Timestamp
    signature: bytes
    def __init__(self, evidence_id: _Optional[str] = ..., signer: _Optional[str] = ..., confirmed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., signature: _Optional[bytes] = ...) -> None: ...

class ErasureBound(_message.Message):
    __slots__ = ("erasure_id", "node_id", "bound_at", "signature")
    ERASURE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    BOUND_AT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    erasure_id: str
    node_id: str
    bound_at: _timestamp_pb2.Timestamp
    signature: bytes
    def __init__(self, erasure_id: _Optional[str] = ..., node_id: _Optional[str] = ..., bound_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., signature: _Optional[bytes] = ...) -> None: ...

class ErasureReceipt(_message.Message):
    __slots__ = ("erasure_id", "node_id", "applied_at", "removed", "signature")
    ERASURE_ID_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    APPLIED_AT_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    erasure_id: str
    node_id: str
    applied_at: _timestamp_pb2.Timestamp
    removed: int
    signature: bytes
    def __init__(self, erasure_id: _Optional[str] = ..., node_id: _Optional[str] = ..., applied_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., removed: _Optional[int] = ..., signature: _Optional[bytes] = ...) -> None: ...

class MemberRecord(_message.Message):
    __slots__ = ("node_id", "address", "certificate", "incarnation", "signature")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    certificate: bytes
    incarnation: int
    signature: bytes
    def __init__(self, node_id: _Optional[str] = ..., address: _Optional[str] = ..., certificate: _Optional[bytes] = ..., incarnation: _Optional[int] = ..., signature: _Optional[bytes] = ...) -> None: ...

class RejectedItem(_message.Message):
    __slots__ = ("id", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: str
    def __init__(self, id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class PushDeltaResponse(_message.Message):
    __slots__ = ("accepted", "rejected")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    rejected: _containers.RepeatedCompositeFieldContainer[RejectedItem]
    def __init__(self, accepted: _Optional[int] = ..., rejected: _Optional[_Iterable[_Union[RejectedItem, _Mapping]]] = ...) -> None: ...

class ListMembersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Member(_message.Message):
    __slots__ = ("node_id", "address", "last_heard", "certificate_expires", "revoked", "max_anchor", "self", "refused", "incarnation")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARD_FIELD_NUMBER: _ClassVar[int]
    CERTIFICATE_EXPIRES_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    MAX_ANCHOR_FIELD_NUMBER: _ClassVar[int]
    SELF_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    address: str
    last_heard: _timestamp_pb2.Timestamp
    certificate_expires: _timestamp_pb2.Timestamp
    revoked: bool
    max_anchor: str
    self: bool
    refused: str
    incarnation: int
    def __init__(self_, node_id: _Optional[str] = ..., address: _Optional[str] = ..., last_heard: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., certificate_expires: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revoked: _Optional[bool] = ..., max_anchor: _Optional[str] = ..., self: _Optional[bool] = ..., refused: _Optional[str] = ..., incarnation: _Optional[int] = ...) -> None: ...

class ListMembersResponse(_message.Message):
    __slots__ = ("members", "revocation_list_number")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    REVOCATION_LIST_NUMBER_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    revocation_list_number: int
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., revocation_list_number: _Optional[int] = ...) -> None: ...

class RevokeRequest(_message.Message):
    __slots__ = ("revocation_list",)
    REVOCATION_LIST_FIELD_NUMBER: _ClassVar[int]
    revocation_list: bytes
    def __init__(self, revocation_list: _Optional[bytes] = ...) -> None: ...

class RevokeResponse(_message.Message):
    __slots__ = ("applied", "number", "revoked")
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    applied: bool
    number: int
    revoked: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, applied: _Optional[bool] = ..., number: _Optional[int] = ..., revoked: _Optional[_Iterable[str]] = ...) -> None: ...

class ExportRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExportChunk(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class ImportChunk(_message.Message):
    __slots__ = ("data", "force_policy")
    DATA_FIELD_NUMBER: _ClassVar[int]
    FORCE_POLICY_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    force_policy: bool
    def __init__(self, data: _Optional[bytes] = ..., force_policy: _Optional[bool] = ...) -> None: ...

class ImportResponse(_message.Message):
    __slots__ = ("node_id", "evidence", "tombstones", "pins", "decisions", "policy_differed")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    TOMBSTONES_FIELD_NUMBER: _ClassVar[int]
    PINS_FIELD_NUMBER: _ClassVar[int]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    POLICY_DIFFERED_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    evidence: int
    tombstones: int
    pins: int
    decisions: int
    policy_differed: bool
    def __init__(self, node_id: _Optional[str] = ..., evidence: _Optional[int] = ..., tombstones: _Optional[int] = ..., pins: _Optional[int] = ..., decisions: _Optional[int] = ..., policy_differed: _Optional[bool] = ...) -> None: ...

class BackupRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class BackupResponse(_message.Message):
    __slots__ = ("destination", "bytes")
    DESTINATION_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    destination: str
    bytes: int
    def __init__(self, destination: _Optional[str] = ..., bytes: _Optional[int] = ...) -> None: ...
