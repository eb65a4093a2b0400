package episodic.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Administration of the suite: API keys, the audit log, datasets' erasure and lifecycle
 * policy. Served by the Ingest process.
 * </pre>
 */
@javax.annotation.Generated(
    value = "by gRPC proto compiler",
    comments = "Source: episodic/v1/admin_service.proto")
@io.grpc.stub.annotations.GrpcGenerated
public final class AdminServiceGrpc {

  private AdminServiceGrpc() {}

  public static final String SERVICE_NAME = "episodic.v1.AdminService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.CreateApiKeyRequest,
      episodic.v1.AdminServiceOuterClass.CreateApiKeyResponse> getCreateApiKeyMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CreateApiKey",
      requestType = episodic.v1.AdminServiceOuterClass.CreateApiKeyRequest.class,
      responseType = episodic.v1.AdminServiceOuterClass.CreateApiKeyResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.CreateApiKeyRequest,
      episodic.v1.AdminServiceOuterClass.CreateApiKeyResponse> getCreateApiKeyMethod() {
    io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.CreateApiKeyRequest, episodic.v1.AdminServiceOuterClass.CreateApiKeyResponse> getCreateApiKeyMethod;
    if ((getCreateApiKeyMethod = AdminServiceGrpc.getCreateApiKeyMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getCreateApiKeyMethod = AdminServiceGrpc.getCreateApiKeyMethod) == null) {
          AdminServiceGrpc.getCreateApiKeyMethod = getCreateApiKeyMethod =
              io.grpc.MethodDescriptor.<episodic.v1.AdminServiceOuterClass.CreateApiKeyRequest, episodic.v1.AdminServiceOuterClass.CreateApiKeyResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CreateApiKey"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.CreateApiKeyRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.CreateApiKeyResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("CreateApiKey"))
              .build();
        }
      }
    }
    return getCreateApiKeyMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.ListApiKeysRequest,
      episodic.v1.AdminServiceOuterClass.ListApiKeysResponse> getListApiKeysMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListApiKeys",
      requestType = episodic.v1.AdminServiceOuterClass.ListApiKeysRequest.class,
      responseType = episodic.v1.AdminServiceOuterClass.ListApiKeysResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.ListApiKeysRequest,
      episodic.v1.AdminServiceOuterClass.ListApiKeysResponse> getListApiKeysMethod() {
    io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.ListApiKeysRequest, episodic.v1.AdminServiceOuterClass.ListApiKeysResponse> getListApiKeysMethod;
    if ((getListApiKeysMethod = AdminServiceGrpc.getListApiKeysMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getListApiKeysMethod = AdminServiceGrpc.getListApiKeysMethod) == null) {
          AdminServiceGrpc.getListApiKeysMethod = getListApiKeysMethod =
              io.grpc.MethodDescriptor.<episodic.v1.AdminServiceOuterClass.ListApiKeysRequest, episodic.v1.AdminServiceOuterClass.ListApiKeysResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListApiKeys"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.ListApiKeysRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.ListApiKeysResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ListApiKeys"))
              .build();
        }
      }
    }
    return getListApiKeysMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.RevokeApiKeyRequest,
      episodic.v1.AdminServiceOuterClass.RevokeApiKeyResponse> getRevokeApiKeyMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RevokeApiKey",
      requestType = episodic.v1.AdminServiceOuterClass.RevokeApiKeyRequest.class,
      responseType = episodic.v1.AdminServiceOuterClass.RevokeApiKeyResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.RevokeApiKeyRequest,
      episodic.v1.AdminServiceOuterClass.RevokeApiKeyResponse> getRevokeApiKeyMethod() {
    io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.RevokeApiKeyRequest, episodic.v1.AdminServiceOuterClass.RevokeApiKeyResponse> getRevokeApiKeyMethod;
    if ((getRevokeApiKeyMethod = AdminServiceGrpc.getRevokeApiKeyMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getRevokeApiKeyMethod = AdminServiceGrpc.getRevokeApiKeyMethod) == null) {
          AdminServiceGrpc.getRevokeApiKeyMethod = getRevokeApiKeyMethod =
              io.grpc.MethodDescriptor.<episodic.v1.AdminServiceOuterClass.RevokeApiKeyRequest, episodic.v1.AdminServiceOuterClass.RevokeApiKeyResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RevokeApiKey"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.RevokeApiKeyRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.RevokeApiKeyResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("RevokeApiKey"))
              .build();
        }
      }
    }
    return getRevokeApiKeyMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.ListDatasetsRequest,
      episodic.v1.AdminServiceOuterClass.ListDatasetsResponse> getListDatasetsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListDatasets",
      requestType = episodic.v1.AdminServiceOuterClass.ListDatasetsRequest.class,
      responseType = episodic.v1.AdminServiceOuterClass.ListDatasetsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.ListDatasetsRequest,
      episodic.v1.AdminServiceOuterClass.ListDatasetsResponse> getListDatasetsMethod() {
    io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.ListDatasetsRequest, episodic.v1.AdminServiceOuterClass.ListDatasetsResponse> getListDatasetsMethod;
    if ((getListDatasetsMethod = AdminServiceGrpc.getListDatasetsMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getListDatasetsMethod = AdminServiceGrpc.getListDatasetsMethod) == null) {
          AdminServiceGrpc.getListDatasetsMethod = getListDatasetsMethod =
              io.grpc.MethodDescriptor.<episodic.v1.AdminServiceOuterClass.ListDatasetsRequest, episodic.v1.AdminServiceOuterClass.ListDatasetsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListDatasets"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.ListDatasetsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.ListDatasetsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ListDatasets"))
              .build();
        }
      }
    }
    return getListDatasetsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.ListAuditEventsRequest,
      episodic.v1.AdminServiceOuterClass.ListAuditEventsResponse> getListAuditEventsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListAuditEvents",
      requestType = episodic.v1.AdminServiceOuterClass.ListAuditEventsRequest.class,
      responseType = episodic.v1.AdminServiceOuterClass.ListAuditEventsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.ListAuditEventsRequest,
      episodic.v1.AdminServiceOuterClass.ListAuditEventsResponse> getListAuditEventsMethod() {
    io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.ListAuditEventsRequest, episodic.v1.AdminServiceOuterClass.ListAuditEventsResponse> getListAuditEventsMethod;
    if ((getListAuditEventsMethod = AdminServiceGrpc.getListAuditEventsMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getListAuditEventsMethod = AdminServiceGrpc.getListAuditEventsMethod) == null) {
          AdminServiceGrpc.getListAuditEventsMethod = getListAuditEventsMethod =
              io.grpc.MethodDescriptor.<episodic.v1.AdminServiceOuterClass.ListAuditEventsRequest, episodic.v1.AdminServiceOuterClass.ListAuditEventsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListAuditEvents"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.ListAuditEventsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.ListAuditEventsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ListAuditEvents"))
              .build();
        }
      }
    }
    return getListAuditEventsMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.DeleteDatasetRequest,
      episodic.v1.AdminServiceOuterClass.DeleteDatasetResponse> getDeleteDatasetMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "DeleteDataset",
      requestType = episodic.v1.AdminServiceOuterClass.DeleteDatasetRequest.class,
      responseType = episodic.v1.AdminServiceOuterClass.DeleteDatasetResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.DeleteDatasetRequest,
      episodic.v1.AdminServiceOuterClass.DeleteDatasetResponse> getDeleteDatasetMethod() {
    io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.DeleteDatasetRequest, episodic.v1.AdminServiceOuterClass.DeleteDatasetResponse> getDeleteDatasetMethod;
    if ((getDeleteDatasetMethod = AdminServiceGrpc.getDeleteDatasetMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getDeleteDatasetMethod = AdminServiceGrpc.getDeleteDatasetMethod) == null) {
          AdminServiceGrpc.getDeleteDatasetMethod = getDeleteDatasetMethod =
              io.grpc.MethodDescriptor.<episodic.v1.AdminServiceOuterClass.DeleteDatasetRequest, episodic.v1.AdminServiceOuterClass.DeleteDatasetResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "DeleteDataset"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.DeleteDatasetRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.DeleteDatasetResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("DeleteDataset"))
              .build();
        }
      }
    }
    return getDeleteDatasetMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.DeleteThreadRequest,
      episodic.v1.AdminServiceOuterClass.DeleteThreadResponse> getDeleteThreadMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "DeleteThread",
      requestType = episodic.v1.AdminServiceOuterClass.DeleteThreadRequest.class,
      responseType = episodic.v1.AdminServiceOuterClass.DeleteThreadResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.DeleteThreadRequest,
      episodic.v1.AdminServiceOuterClass.DeleteThreadResponse> getDeleteThreadMethod() {
    io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.DeleteThreadRequest, episodic.v1.AdminServiceOuterClass.DeleteThreadResponse> getDeleteThreadMethod;
    if ((getDeleteThreadMethod = AdminServiceGrpc.getDeleteThreadMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getDeleteThreadMethod = AdminServiceGrpc.getDeleteThreadMethod) == null) {
          AdminServiceGrpc.getDeleteThreadMethod = getDeleteThreadMethod =
              io.grpc.MethodDescriptor.<episodic.v1.AdminServiceOuterClass.DeleteThreadRequest, episodic.v1.AdminServiceOuterClass.DeleteThreadResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "DeleteThread"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.DeleteThreadRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.DeleteThreadResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("DeleteThread"))
              .build();
        }
      }
    }
    return getDeleteThreadMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.DeleteProcedureRequest,
      episodic.v1.AdminServiceOuterClass.DeleteProcedureResponse> getDeleteProcedureMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "DeleteProcedure",
      requestType = episodic.v1.AdminServiceOuterClass.DeleteProcedureRequest.class,
      responseType = episodic.v1.AdminServiceOuterClass.DeleteProcedureResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.DeleteProcedureRequest,
      episodic.v1.AdminServiceOuterClass.DeleteProcedureResponse> getDeleteProcedureMethod() {
    io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.DeleteProcedureRequest, episodic.v1.AdminServiceOuterClass.DeleteProcedureResponse> getDeleteProcedureMethod;
    if ((getDeleteProcedureMethod = AdminServiceGrpc.getDeleteProcedureMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getDeleteProcedureMethod = AdminServiceGrpc.getDeleteProcedureMethod) == null) {
          AdminServiceGrpc.getDeleteProcedureMethod = getDeleteProcedureMethod =
              io.grpc.MethodDescriptor.<episodic.v1.AdminServiceOuterClass.DeleteProcedureRequest, episodic.v1.AdminServiceOuterClass.DeleteProcedureResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "DeleteProcedure"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.DeleteProcedureRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.DeleteProcedureResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("DeleteProcedure"))
              .build();
        }
      }
    }
    return getDeleteProcedureMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.GetDatasetPolicyRequest,
      episodic.v1.AdminServiceOuterClass.GetDatasetPolicyResponse> getGetDatasetPolicyMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetDatasetPolicy",
      requestType = episodic.v1.AdminServiceOuterClass.GetDatasetPolicyRequest.class,
      responseType = episodic.v1.AdminServiceOuterClass.GetDatasetPolicyResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.GetDatasetPolicyRequest,
      episodic.v1.AdminServiceOuterClass.GetDatasetPolicyResponse> getGetDatasetPolicyMethod() {
    io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.GetDatasetPolicyRequest, episodic.v1.AdminServiceOuterClass.GetDatasetPolicyResponse> getGetDatasetPolicyMethod;
    if ((getGetDatasetPolicyMethod = AdminServiceGrpc.getGetDatasetPolicyMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getGetDatasetPolicyMethod = AdminServiceGrpc.getGetDatasetPolicyMethod) == null) {
          AdminServiceGrpc.getGetDatasetPolicyMethod = getGetDatasetPolicyMethod =
              io.grpc.MethodDescriptor.<episodic.v1.AdminServiceOuterClass.GetDatasetPolicyRequest, episodic.v1.AdminServiceOuterClass.GetDatasetPolicyResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetDatasetPolicy"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.GetDatasetPolicyRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.GetDatasetPolicyResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("GetDatasetPolicy"))
              .build();
        }
      }
    }
    return getGetDatasetPolicyMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.SetDatasetPolicyRequest,
      episodic.v1.AdminServiceOuterClass.SetDatasetPolicyResponse> getSetDatasetPolicyMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "SetDatasetPolicy",
      requestType = episodic.v1.AdminServiceOuterClass.SetDatasetPolicyRequest.class,
      responseType = episodic.v1.AdminServiceOuterClass.SetDatasetPolicyResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.SetDatasetPolicyRequest,
      episodic.v1.AdminServiceOuterClass.SetDatasetPolicyResponse> getSetDatasetPolicyMethod() {
    io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.SetDatasetPolicyRequest, episodic.v1.AdminServiceOuterClass.SetDatasetPolicyResponse> getSetDatasetPolicyMethod;
    if ((getSetDatasetPolicyMethod = AdminServiceGrpc.getSetDatasetPolicyMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getSetDatasetPolicyMethod = AdminServiceGrpc.getSetDatasetPolicyMethod) == null) {
          AdminServiceGrpc.getSetDatasetPolicyMethod = getSetDatasetPolicyMethod =
              io.grpc.MethodDescriptor.<episodic.v1.AdminServiceOuterClass.SetDatasetPolicyRequest, episodic.v1.AdminServiceOuterClass.SetDatasetPolicyResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "SetDatasetPolicy"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.SetDatasetPolicyRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.SetDatasetPolicyResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("SetDatasetPolicy"))
              .build();
        }
      }
    }
    return getSetDatasetPolicyMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.ListEntitiesRequest,
      episodic.v1.AdminServiceOuterClass.ListEntitiesResponse> getListEntitiesMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListEntities",
      requestType = episodic.v1.AdminServiceOuterClass.ListEntitiesRequest.class,
      responseType = episodic.v1.AdminServiceOuterClass.ListEntitiesResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.ListEntitiesRequest,
      episodic.v1.AdminServiceOuterClass.ListEntitiesResponse> getListEntitiesMethod() {
    io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.ListEntitiesRequest, episodic.v1.AdminServiceOuterClass.ListEntitiesResponse> getListEntitiesMethod;
    if ((getListEntitiesMethod = AdminServiceGrpc.getListEntitiesMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getListEntitiesMethod = AdminServiceGrpc.getListEntitiesMethod) == null) {
          AdminServiceGrpc.getListEntitiesMethod = getListEntitiesMethod =
              io.grpc.MethodDescriptor.<episodic.v1.AdminServiceOuterClass.ListEntitiesRequest, episodic.v1.AdminServiceOuterClass.ListEntitiesResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListEntities"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.ListEntitiesRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.ListEntitiesResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("ListEntities"))
              .build();
        }
      }
    }
    return getListEntitiesMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.MergeEntitiesRequest,
      episodic.v1.AdminServiceOuterClass.MergeEntitiesResponse> getMergeEntitiesMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "MergeEntities",
      requestType = episodic.v1.AdminServiceOuterClass.MergeEntitiesRequest.class,
      responseType = episodic.v1.AdminServiceOuterClass.MergeEntitiesResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.MergeEntitiesRequest,
      episodic.v1.AdminServiceOuterClass.MergeEntitiesResponse> getMergeEntitiesMethod() {
    io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.MergeEntitiesRequest, episodic.v1.AdminServiceOuterClass.MergeEntitiesResponse> getMergeEntitiesMethod;
    if ((getMergeEntitiesMethod = AdminServiceGrpc.getMergeEntitiesMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getMergeEntitiesMethod = AdminServiceGrpc.getMergeEntitiesMethod) == null) {
          AdminServiceGrpc.getMergeEntitiesMethod = getMergeEntitiesMethod =
              io.grpc.MethodDescriptor.<episodic.v1.AdminServiceOuterClass.MergeEntitiesRequest, episodic.v1.AdminServiceOuterClass.MergeEntitiesResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "MergeEntities"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.MergeEntitiesRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.MergeEntitiesResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("MergeEntities"))
              .build();
        }
      }
    }
    return getMergeEntitiesMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.SplitEntityRequest,
      episodic.v1.AdminServiceOuterClass.SplitEntityResponse> getSplitEntityMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "SplitEntity",
      requestType = episodic.v1.AdminServiceOuterClass.SplitEntityRequest.class,
      responseType = episodic.v1.AdminServiceOuterClass.SplitEntityResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.SplitEntityRequest,
      episodic.v1.AdminServiceOuterClass.SplitEntityResponse> getSplitEntityMethod() {
    io.grpc.MethodDescriptor<episodic.v1.AdminServiceOuterClass.SplitEntityRequest, episodic.v1.AdminServiceOuterClass.SplitEntityResponse> getSplitEntityMethod;
    if ((getSplitEntityMethod = AdminServiceGrpc.getSplitEntityMethod) == null) {
      synchronized (AdminServiceGrpc.class) {
        if ((getSplitEntityMethod = AdminServiceGrpc.getSplitEntityMethod) == null) {
          AdminServiceGrpc.getSplitEntityMethod = getSplitEntityMethod =
              io.grpc.MethodDescriptor.<episodic.v1.AdminServiceOuterClass.SplitEntityRequest, episodic.v1.AdminServiceOuterClass.SplitEntityResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "SplitEntity"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.SplitEntityRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.AdminServiceOuterClass.SplitEntityResponse.getDefaultInstance()))
              .setSchemaDescriptor(new AdminServiceMethodDescriptorSupplier("SplitEntity"))
              .build();
        }
      }
    }
    return getSplitEntityMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static AdminServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceStub>() {
        @java.lang.Override
        public AdminServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceStub(channel, callOptions);
        }
      };
    return AdminServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static AdminServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceBlockingStub>() {
        @java.lang.Override
        public AdminServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceBlockingStub(channel, callOptions);
        }
      };
    return AdminServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static AdminServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<AdminServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<AdminServiceFutureStub>() {
        @java.lang.Override
        public AdminServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new AdminServiceFutureStub(channel, callOptions);
        }
      };
    return AdminServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Administration of the suite: API keys, the audit log, datasets' erasure and lifecycle
   * policy. Served by the Ingest process.
   * </pre>
   */
  public static abstract class AdminServiceImplBase implements io.grpc.BindableService {

    /**
     * <pre>
     * Creates an API key. The secret is in the response only: it is stored as a hash.
     * </pre>
     */
    public void createApiKey(episodic.v1.AdminServiceOuterClass.CreateApiKeyRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.CreateApiKeyResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCreateApiKeyMethod(), responseObserver);
    }

    /**
     * <pre>
     * Pages through API keys (never their secrets), newest first.
     * </pre>
     */
    public void listApiKeys(episodic.v1.AdminServiceOuterClass.ListApiKeysRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.ListApiKeysResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListApiKeysMethod(), responseObserver);
    }

    /**
     * <pre>
     * Revokes an API key by its id or public prefix. Every replica refuses it within
     * seconds. Revoking a revoked key returns it unchanged.
     * </pre>
     */
    public void revokeApiKey(episodic.v1.AdminServiceOuterClass.RevokeApiKeyRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.RevokeApiKeyResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRevokeApiKeyMethod(), responseObserver);
    }

    /**
     * <pre>
     * Pages through the datasets (the ones with threads), most recently active first.
     * </pre>
     */
    public void listDatasets(episodic.v1.AdminServiceOuterClass.ListDatasetsRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.ListDatasetsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListDatasetsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Pages through the audit log: admin actions, newest first.
     * </pre>
     */
    public void listAuditEvents(episodic.v1.AdminServiceOuterClass.ListAuditEventsRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.ListAuditEventsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListAuditEventsMethod(), responseObserver);
    }

    /**
     * <pre>
     * Erases a dataset: every thread, message, episode (any status), embedding, chunk,
     * fact, timer and idempotency key of it, and its data key (crypto-erasure of backups).
     * Runs in short transactions while the pipeline keeps running; threads cannot be
     * created in the dataset until it is done. NOT_FOUND when nothing of it is stored;
     * ABORTED while another erasure of it runs. Returns a receipt, also kept in the audit
     * log under a pseudonym.
     * </pre>
     */
    public void deleteDataset(episodic.v1.AdminServiceOuterClass.DeleteDatasetRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.DeleteDatasetResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDeleteDatasetMethod(), responseObserver);
    }

    /**
     * <pre>
     * Erases one thread and everything derived from it; returns a receipt.
     * </pre>
     */
    public void deleteThread(episodic.v1.AdminServiceOuterClass.DeleteThreadRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.DeleteThreadResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDeleteThreadMethod(), responseObserver);
    }

    /**
     * <pre>
     * Deletes a procedure and forgets the stretches it was learned from (they are not
     * learned again; the conversations and episodes stay). NOT_FOUND when the dataset has no
     * such procedure.
     * </pre>
     */
    public void deleteProcedure(episodic.v1.AdminServiceOuterClass.DeleteProcedureRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.DeleteProcedureResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDeleteProcedureMethod(), responseObserver);
    }

    /**
     * <pre>
     * A dataset's retention and compaction policy, and whether it is encrypted.
     * </pre>
     */
    public void getDatasetPolicy(episodic.v1.AdminServiceOuterClass.GetDatasetPolicyRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.GetDatasetPolicyResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetDatasetPolicyMethod(), responseObserver);
    }

    /**
     * <pre>
     * Sets a dataset's retention and compaction policy (unset fields: the global default).
     * </pre>
     */
    public void setDatasetPolicy(episodic.v1.AdminServiceOuterClass.SetDatasetPolicyRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.SetDatasetPolicyResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSetDatasetPolicyMethod(), responseObserver);
    }

    /**
     * <pre>
     * Pages through a dataset's canonical entities (oldest first) with their aliases and
     * how many current episodes mention each.
     * </pre>
     */
    public void listEntities(episodic.v1.AdminServiceOuterClass.ListEntitiesRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.ListEntitiesResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListEntitiesMethod(), responseObserver);
    }

    /**
     * <pre>
     * Merges entities into one: every alias of `sources` becomes an alias of `into`, and
     * entity filters and timelines of any of them then find the episodes of all. Audited.
     * </pre>
     */
    public void mergeEntities(episodic.v1.AdminServiceOuterClass.MergeEntitiesRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.MergeEntitiesResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getMergeEntitiesMethod(), responseObserver);
    }

    /**
     * <pre>
     * Splits one alias off its entity into a new entity of its own (for two different
     * things the normalisation rules or a merge put together). FAILED_PRECONDITION when it is
     * the entity's only alias. Audited.
     * </pre>
     */
    public void splitEntity(episodic.v1.AdminServiceOuterClass.SplitEntityRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.SplitEntityResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSplitEntityMethod(), responseObserver);
    }

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
          .addMethod(
            getCreateApiKeyMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.AdminServiceOuterClass.CreateApiKeyRequest,
                episodic.v1.AdminServiceOuterClass.CreateApiKeyResponse>(
                  this, METHODID_CREATE_API_KEY)))
          .addMethod(
            getListApiKeysMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.AdminServiceOuterClass.ListApiKeysRequest,
                episodic.v1.AdminServiceOuterClass.ListApiKeysResponse>(
                  this, METHODID_LIST_API_KEYS)))
          .addMethod(
            getRevokeApiKeyMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.AdminServiceOuterClass.RevokeApiKeyRequest,
                episodic.v1.AdminServiceOuterClass.RevokeApiKeyResponse>(
                  this, METHODID_REVOKE_API_KEY)))
          .addMethod(
            getListDatasetsMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.AdminServiceOuterClass.ListDatasetsRequest,
                episodic.v1.AdminServiceOuterClass.ListDatasetsResponse>(
                  this, METHODID_LIST_DATASETS)))
          .addMethod(
            getListAuditEventsMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.AdminServiceOuterClass.ListAuditEventsRequest,
                episodic.v1.AdminServiceOuterClass.ListAuditEventsResponse>(
                  this, METHODID_LIST_AUDIT_EVENTS)))
          .addMethod(
            getDeleteDatasetMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.AdminServiceOuterClass.DeleteDatasetRequest,
                episodic.v1.AdminServiceOuterClass.DeleteDatasetResponse>(
                  this, METHODID_DELETE_DATASET)))
          .addMethod(
            getDeleteThreadMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.AdminServiceOuterClass.DeleteThreadRequest,
                episodic.v1.AdminServiceOuterClass.DeleteThreadResponse>(
                  this, METHODID_DELETE_THREAD)))
          .addMethod(
            getDeleteProcedureMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.AdminServiceOuterClass.DeleteProcedureRequest,
                episodic.v1.AdminServiceOuterClass.DeleteProcedureResponse>(
                  this, METHODID_DELETE_PROCEDURE)))
          .addMethod(
            getGetDatasetPolicyMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.AdminServiceOuterClass.GetDatasetPolicyRequest,
                episodic.v1.AdminServiceOuterClass.GetDatasetPolicyResponse>(
                  this, METHODID_GET_DATASET_POLICY)))
          .addMethod(
            getSetDatasetPolicyMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.AdminServiceOuterClass.SetDatasetPolicyRequest,
                episodic.v1.AdminServiceOuterClass.SetDatasetPolicyResponse>(
                  this, METHODID_SET_DATASET_POLICY)))
          .addMethod(
            getListEntitiesMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.AdminServiceOuterClass.ListEntitiesRequest,
                episodic.v1.AdminServiceOuterClass.ListEntitiesResponse>(
                  this, METHODID_LIST_ENTITIES)))
          .addMethod(
            getMergeEntitiesMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.AdminServiceOuterClass.MergeEntitiesRequest,
                episodic.v1.AdminServiceOuterClass.MergeEntitiesResponse>(
                  this, METHODID_MERGE_ENTITIES)))
          .addMethod(
            getSplitEntityMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.AdminServiceOuterClass.SplitEntityRequest,
                episodic.v1.AdminServiceOuterClass.SplitEntityResponse>(
                  this, METHODID_SPLIT_ENTITY)))
          .build();
    }
  }

  /**
   * <pre>
   * Administration of the suite: API keys, the audit log, datasets' erasure and lifecycle
   * policy. Served by the Ingest process.
   * </pre>
   */
  public static final class AdminServiceStub extends io.grpc.stub.AbstractAsyncStub<AdminServiceStub> {
    private AdminServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates an API key. The secret is in the response only: it is stored as a hash.
     * </pre>
     */
    public void createApiKey(episodic.v1.AdminServiceOuterClass.CreateApiKeyRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.CreateApiKeyResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCreateApiKeyMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Pages through API keys (never their secrets), newest first.
     * </pre>
     */
    public void listApiKeys(episodic.v1.AdminServiceOuterClass.ListApiKeysRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.ListApiKeysResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListApiKeysMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Revokes an API key by its id or public prefix. Every replica refuses it within
     * seconds. Revoking a revoked key returns it unchanged.
     * </pre>
     */
    public void revokeApiKey(episodic.v1.AdminServiceOuterClass.RevokeApiKeyRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.RevokeApiKeyResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRevokeApiKeyMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Pages through the datasets (the ones with threads), most recently active first.
     * </pre>
     */
    public void listDatasets(episodic.v1.AdminServiceOuterClass.ListDatasetsRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.ListDatasetsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListDatasetsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Pages through the audit log: admin actions, newest first.
     * </pre>
     */
    public void listAuditEvents(episodic.v1.AdminServiceOuterClass.ListAuditEventsRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.ListAuditEventsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListAuditEventsMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Erases a dataset: every thread, message, episode (any status), embedding, chunk,
     * fact, timer and idempotency key of it, and its data key (crypto-erasure of backups).
     * Runs in short transactions while the pipeline keeps running; threads cannot be
     * created in the dataset until it is done. NOT_FOUND when nothing of it is stored;
     * ABORTED while another erasure of it runs. Returns a receipt, also kept in the audit
     * log under a pseudonym.
     * </pre>
     */
    public void deleteDataset(episodic.v1.AdminServiceOuterClass.DeleteDatasetRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.DeleteDatasetResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDeleteDatasetMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Erases one thread and everything derived from it; returns a receipt.
     * </pre>
     */
    public void deleteThread(episodic.v1.AdminServiceOuterClass.DeleteThreadRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.DeleteThreadResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDeleteThreadMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Deletes a procedure and forgets the stretches it was learned from (they are not
     * learned again; the conversations and episodes stay). NOT_FOUND when the dataset has no
     * such procedure.
     * </pre>
     */
    public void deleteProcedure(episodic.v1.AdminServiceOuterClass.DeleteProcedureRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.DeleteProcedureResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDeleteProcedureMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * A dataset's retention and compaction policy, and whether it is encrypted.
     * </pre>
     */
    public void getDatasetPolicy(episodic.v1.AdminServiceOuterClass.GetDatasetPolicyRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.GetDatasetPolicyResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetDatasetPolicyMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Sets a dataset's retention and compaction policy (unset fields: the global default).
     * </pre>
     */
    public void setDatasetPolicy(episodic.v1.AdminServiceOuterClass.SetDatasetPolicyRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.SetDatasetPolicyResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getSetDatasetPolicyMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Pages through a dataset's canonical entities (oldest first) with their aliases and
     * how many current episodes mention each.
     * </pre>
     */
    public void listEntities(episodic.v1.AdminServiceOuterClass.ListEntitiesRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.ListEntitiesResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListEntitiesMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Merges entities into one: every alias of `sources` becomes an alias of `into`, and
     * entity filters and timelines of any of them then find the episodes of all. Audited.
     * </pre>
     */
    public void mergeEntities(episodic.v1.AdminServiceOuterClass.MergeEntitiesRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.MergeEntitiesResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getMergeEntitiesMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Splits one alias off its entity into a new entity of its own (for two different
     * things the normalisation rules or a merge put together). FAILED_PRECONDITION when it is
     * the entity's only alias. Audited.
     * </pre>
     */
    public void splitEntity(episodic.v1.AdminServiceOuterClass.SplitEntityRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.SplitEntityResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getSplitEntityMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * <pre>
   * Administration of the suite: API keys, the audit log, datasets' erasure and lifecycle
   * policy. Served by the Ingest process.
   * </pre>
   */
  public static final class AdminServiceBlockingStub extends io.grpc.stub.AbstractBlockingStub<AdminServiceBlockingStub> {
    private AdminServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates an API key. The secret is in the response only: it is stored as a hash.
     * </pre>
     */
    public episodic.v1.AdminServiceOuterClass.CreateApiKeyResponse createApiKey(episodic.v1.AdminServiceOuterClass.CreateApiKeyRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCreateApiKeyMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pages through API keys (never their secrets), newest first.
     * </pre>
     */
    public episodic.v1.AdminServiceOuterClass.ListApiKeysResponse listApiKeys(episodic.v1.AdminServiceOuterClass.ListApiKeysRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListApiKeysMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Revokes an API key by its id or public prefix. Every replica refuses it within
     * seconds. Revoking a revoked key returns it unchanged.
     * </pre>
     */
    public episodic.v1.AdminServiceOuterClass.RevokeApiKeyResponse revokeApiKey(episodic.v1.AdminServiceOuterClass.RevokeApiKeyRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRevokeApiKeyMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pages through the datasets (the ones with threads), most recently active first.
     * </pre>
     */
    public episodic.v1.AdminServiceOuterClass.ListDatasetsResponse listDatasets(episodic.v1.AdminServiceOuterClass.ListDatasetsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListDatasetsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pages through the audit log: admin actions, newest first.
     * </pre>
     */
    public episodic.v1.AdminServiceOuterClass.ListAuditEventsResponse listAuditEvents(episodic.v1.AdminServiceOuterClass.ListAuditEventsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListAuditEventsMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Erases a dataset: every thread, message, episode (any status), embedding, chunk,
     * fact, timer and idempotency key of it, and its data key (crypto-erasure of backups).
     * Runs in short transactions while the pipeline keeps running; threads cannot be
     * created in the dataset until it is done. NOT_FOUND when nothing of it is stored;
     * ABORTED while another erasure of it runs. Returns a receipt, also kept in the audit
     * log under a pseudonym.
     * </pre>
     */
    public episodic.v1.AdminServiceOuterClass.DeleteDatasetResponse deleteDataset(episodic.v1.AdminServiceOuterClass.DeleteDatasetRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDeleteDatasetMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Erases one thread and everything derived from it; returns a receipt.
     * </pre>
     */
    public episodic.v1.AdminServiceOuterClass.DeleteThreadResponse deleteThread(episodic.v1.AdminServiceOuterClass.DeleteThreadRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDeleteThreadMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Deletes a procedure and forgets the stretches it was learned from (they are not
     * learned again; the conversations and episodes stay). NOT_FOUND when the dataset has no
     * such procedure.
     * </pre>
     */
    public episodic.v1.AdminServiceOuterClass.DeleteProcedureResponse deleteProcedure(episodic.v1.AdminServiceOuterClass.DeleteProcedureRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDeleteProcedureMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * A dataset's retention and compaction policy, and whether it is encrypted.
     * </pre>
     */
    public episodic.v1.AdminServiceOuterClass.GetDatasetPolicyResponse getDatasetPolicy(episodic.v1.AdminServiceOuterClass.GetDatasetPolicyRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetDatasetPolicyMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Sets a dataset's retention and compaction policy (unset fields: the global default).
     * </pre>
     */
    public episodic.v1.AdminServiceOuterClass.SetDatasetPolicyResponse setDatasetPolicy(episodic.v1.AdminServiceOuterClass.SetDatasetPolicyRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getSetDatasetPolicyMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pages through a dataset's canonical entities (oldest first) with their aliases and
     * how many current episodes mention each.
     * </pre>
     */
    public episodic.v1.AdminServiceOuterClass.ListEntitiesResponse listEntities(episodic.v1.AdminServiceOuterClass.ListEntitiesRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListEntitiesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Merges entities into one: every alias of `sources` becomes an alias of `into`, and
     * entity filters and timelines of any of them then find the episodes of all. Audited.
     * </pre>
     */
    public episodic.v1.AdminServiceOuterClass.MergeEntitiesResponse mergeEntities(episodic.v1.AdminServiceOuterClass.MergeEntitiesRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getMergeEntitiesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Splits one alias off its entity into a new entity of its own (for two different
     * things the normalisation rules or a merge put together). FAILED_PRECONDITION when it is
     * the entity's only alias. Audited.
     * </pre>
     */
    public episodic.v1.AdminServiceOuterClass.SplitEntityResponse splitEntity(episodic.v1.AdminServiceOuterClass.SplitEntityRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getSplitEntityMethod(), getCallOptions(), request);
    }
  }

  /**
   * <pre>
   * Administration of the suite: API keys, the audit log, datasets' erasure and lifecycle
   * policy. Served by the Ingest process.
   * </pre>
   */
  public static final class AdminServiceFutureStub extends io.grpc.stub.AbstractFutureStub<AdminServiceFutureStub> {
    private AdminServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected AdminServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new AdminServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates an API key. The secret is in the response only: it is stored as a hash.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.AdminServiceOuterClass.CreateApiKeyResponse> createApiKey(
        episodic.v1.AdminServiceOuterClass.CreateApiKeyRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCreateApiKeyMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Pages through API keys (never their secrets), newest first.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.AdminServiceOuterClass.ListApiKeysResponse> listApiKeys(
        episodic.v1.AdminServiceOuterClass.ListApiKeysRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListApiKeysMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Revokes an API key by its id or public prefix. Every replica refuses it within
     * seconds. Revoking a revoked key returns it unchanged.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.AdminServiceOuterClass.RevokeApiKeyResponse> revokeApiKey(
        episodic.v1.AdminServiceOuterClass.RevokeApiKeyRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRevokeApiKeyMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Pages through the datasets (the ones with threads), most recently active first.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.AdminServiceOuterClass.ListDatasetsResponse> listDatasets(
        episodic.v1.AdminServiceOuterClass.ListDatasetsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListDatasetsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Pages through the audit log: admin actions, newest first.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.AdminServiceOuterClass.ListAuditEventsResponse> listAuditEvents(
        episodic.v1.AdminServiceOuterClass.ListAuditEventsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListAuditEventsMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Erases a dataset: every thread, message, episode (any status), embedding, chunk,
     * fact, timer and idempotency key of it, and its data key (crypto-erasure of backups).
     * Runs in short transactions while the pipeline keeps running; threads cannot be
     * created in the dataset until it is done. NOT_FOUND when nothing of it is stored;
     * ABORTED while another erasure of it runs. Returns a receipt, also kept in the audit
     * log under a pseudonym.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.AdminServiceOuterClass.DeleteDatasetResponse> deleteDataset(
        episodic.v1.AdminServiceOuterClass.DeleteDatasetRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDeleteDatasetMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Erases one thread and everything derived from it; returns a receipt.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.AdminServiceOuterClass.DeleteThreadResponse> deleteThread(
        episodic.v1.AdminServiceOuterClass.DeleteThreadRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDeleteThreadMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Deletes a procedure and forgets the stretches it was learned from (they are not
     * learned again; the conversations and episodes stay). NOT_FOUND when the dataset has no
     * such procedure.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.AdminServiceOuterClass.DeleteProcedureResponse> deleteProcedure(
        episodic.v1.AdminServiceOuterClass.DeleteProcedureRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDeleteProcedureMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * A dataset's retention and compaction policy, and whether it is encrypted.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.AdminServiceOuterClass.GetDatasetPolicyResponse> getDatasetPolicy(
        episodic.v1.AdminServiceOuterClass.GetDatasetPolicyRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetDatasetPolicyMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Sets a dataset's retention and compaction policy (unset fields: the global default).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.AdminServiceOuterClass.SetDatasetPolicyResponse> setDatasetPolicy(
        episodic.v1.AdminServiceOuterClass.SetDatasetPolicyRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getSetDatasetPolicyMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Pages through a dataset's canonical entities (oldest first) with their aliases and
     * how many current episodes mention each.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.AdminServiceOuterClass.ListEntitiesResponse> listEntities(
        episodic.v1.AdminServiceOuterClass.ListEntitiesRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListEntitiesMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Merges entities into one: every alias of `sources` becomes an alias of `into`, and
     * entity filters and timelines of any of them then find the episodes of all. Audited.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.AdminServiceOuterClass.MergeEntitiesResponse> mergeEntities(
        episodic.v1.AdminServiceOuterClass.MergeEntitiesRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getMergeEntitiesMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Splits one alias off its entity into a new entity of its own (for two different
     * things the normalisation rules or a merge put together). FAILED_PRECONDITION when it is
     * the entity's only alias. Audited.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.AdminServiceOuterClass.SplitEntityResponse> splitEntity(
        episodic.v1.AdminServiceOuterClass.SplitEntityRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getSplitEntityMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_CREATE_API_KEY = 0;
  private static final int METHODID_LIST_API_KEYS = 1;
  private static final int METHODID_REVOKE_API_KEY = 2;
  private static final int METHODID_LIST_DATASETS = 3;
  private static final int METHODID_LIST_AUDIT_EVENTS = 4;
  private static final int METHODID_DELETE_DATASET = 5;
  private static final int METHODID_DELETE_THREAD = 6;
  private static final int METHODID_DELETE_PROCEDURE = 7;
  private static final int METHODID_GET_DATASET_POLICY = 8;
  private static final int METHODID_SET_DATASET_POLICY = 9;
  private static final int METHODID_LIST_ENTITIES = 10;
  private static final int METHODID_MERGE_ENTITIES = 11;
  private static final int METHODID_SPLIT_ENTITY = 12;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final AdminServiceImplBase serviceImpl;
    private final int methodId;

    MethodHandlers(AdminServiceImplBase serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_CREATE_API_KEY:
          serviceImpl.createApiKey((episodic.v1.AdminServiceOuterClass.CreateApiKeyRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.CreateApiKeyResponse>) responseObserver);
          break;
        case METHODID_LIST_API_KEYS:
          serviceImpl.listApiKeys((episodic.v1.AdminServiceOuterClass.ListApiKeysRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.ListApiKeysResponse>) responseObserver);
          break;
        case METHODID_REVOKE_API_KEY:
          serviceImpl.revokeApiKey((episodic.v1.AdminServiceOuterClass.RevokeApiKeyRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.RevokeApiKeyResponse>) responseObserver);
          break;
        case METHODID_LIST_DATASETS:
          serviceImpl.listDatasets((episodic.v1.AdminServiceOuterClass.ListDatasetsRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.ListDatasetsResponse>) responseObserver);
          break;
        case METHODID_LIST_AUDIT_EVENTS:
          serviceImpl.listAuditEvents((episodic.v1.AdminServiceOuterClass.ListAuditEventsRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.ListAuditEventsResponse>) responseObserver);
          break;
        case METHODID_DELETE_DATASET:
          serviceImpl.deleteDataset((episodic.v1.AdminServiceOuterClass.DeleteDatasetRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.DeleteDatasetResponse>) responseObserver);
          break;
        case METHODID_DELETE_THREAD:
          serviceImpl.deleteThread((episodic.v1.AdminServiceOuterClass.DeleteThreadRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.DeleteThreadResponse>) responseObserver);
          break;
        case METHODID_DELETE_PROCEDURE:
          serviceImpl.deleteProcedure((episodic.v1.AdminServiceOuterClass.DeleteProcedureRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.DeleteProcedureResponse>) responseObserver);
          break;
        case METHODID_GET_DATASET_POLICY:
          serviceImpl.getDatasetPolicy((episodic.v1.AdminServiceOuterClass.GetDatasetPolicyRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.GetDatasetPolicyResponse>) responseObserver);
          break;
        case METHODID_SET_DATASET_POLICY:
          serviceImpl.setDatasetPolicy((episodic.v1.AdminServiceOuterClass.SetDatasetPolicyRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.SetDatasetPolicyResponse>) responseObserver);
          break;
        case METHODID_LIST_ENTITIES:
          serviceImpl.listEntities((episodic.v1.AdminServiceOuterClass.ListEntitiesRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.ListEntitiesResponse>) responseObserver);
          break;
        case METHODID_MERGE_ENTITIES:
          serviceImpl.mergeEntities((episodic.v1.AdminServiceOuterClass.MergeEntitiesRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.MergeEntitiesResponse>) responseObserver);
          break;
        case METHODID_SPLIT_ENTITY:
          serviceImpl.splitEntity((episodic.v1.AdminServiceOuterClass.SplitEntityRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.AdminServiceOuterClass.SplitEntityResponse>) responseObserver);
          break;
        default:
          throw new AssertionError();
      }
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public io.grpc.stub.StreamObserver<Req> invoke(
        io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        default:
          throw new AssertionError();
      }
    }
  }

  private static abstract class AdminServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    AdminServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return episodic.v1.AdminServiceOuterClass.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("AdminService");
    }
  }

  private static final class AdminServiceFileDescriptorSupplier
      extends AdminServiceBaseDescriptorSupplier {
    AdminServiceFileDescriptorSupplier() {}
  }

  private static final class AdminServiceMethodDescriptorSupplier
      extends AdminServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final String methodName;

    AdminServiceMethodDescriptorSupplier(String methodName) {
      this.methodName = methodName;
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.MethodDescriptor getMethodDescriptor() {
      return getServiceDescriptor().findMethodByName(methodName);
    }
  }

  private static volatile io.grpc.ServiceDescriptor serviceDescriptor;

  public static io.grpc.ServiceDescriptor getServiceDescriptor() {
    io.grpc.ServiceDescriptor result = serviceDescriptor;
    if (result == null) {
      synchronized (AdminServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new AdminServiceFileDescriptorSupplier())
              .addMethod(getCreateApiKeyMethod())
              .addMethod(getListApiKeysMethod())
              .addMethod(getRevokeApiKeyMethod())
              .addMethod(getListDatasetsMethod())
              .addMethod(getListAuditEventsMethod())
              .addMethod(getDeleteDatasetMethod())
              .addMethod(getDeleteThreadMethod())
              .addMethod(getDeleteProcedureMethod())
              .addMethod(getGetDatasetPolicyMethod())
              .addMethod(getSetDatasetPolicyMethod())
              .addMethod(getListEntitiesMethod())
              .addMethod(getMergeEntitiesMethod())
              .addMethod(getSplitEntityMethod())
              .build();
        }
      }
    }
    return result;
  }
}
