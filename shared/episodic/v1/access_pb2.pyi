from google.protobuf import descriptor_pb2 as _descriptor_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AccessRole(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACCESS_ROLE_UNSPECIFIED: _ClassVar[AccessRole]
    ACCESS_ROLE_READER: _ClassVar[AccessRole]
    ACCESS_ROLE_WRITER: _ClassVar[AccessRole]
    ACCESS_ROLE_ADMIN: _ClassVar[AccessRole]
    ACCESS_ROLE_SERVICE: _ClassVar[AccessRole]

class AccessScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ACCESS_SCOPE_UNSPECIFIED: _ClassVar[AccessScope]
    ACCESS_SCOPE_DATASET: _ClassVar[AccessScope]
    ACCESS_SCOPE_GLOBAL: _ClassVar[AccessScope]
ACCESS_ROLE_UNSPECIFIED: AccessRole
ACCESS_ROLE_READER: AccessRole
ACCESS_ROLE_WRITER: AccessRole
ACCESS_ROLE_ADMIN: AccessRole
ACCESS_ROLE_SERVICE: AccessRole
ACCESS_SCOPE_UNSPECIFIED: AccessScope
ACCESS_SCOPE_DATASET: AccessScope
ACCESS_SCOPE_GLOBAL: AccessScope
ACCESS_FIELD_NUMBER: _ClassVar[int]
access: _descriptor.FieldDescriptor

class AccessRule(_message.Message):
    __slots__ = ("role", "scope")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    role: AccessRole
    scope: AccessScope
    def __init__(self, role: _Optional[_Union[AccessRole, str]] = ..., scope: _Optional[_Union[AccessScope, str]] = ...) -> None: ...
