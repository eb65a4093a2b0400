package episodic.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Recall is the read path agents call on every turn: the right episodes, by meaning and
 * by time, plus the admin reads.
 * </pre>
 */
@javax.annotation.Generated(
    value = "by gRPC proto compiler",
    comments = "Source: episodic/v1/recall_service.proto")
@io.grpc.stub.annotations.GrpcGenerated
public final class RecallServiceGrpc {

  private RecallServiceGrpc() {}

  public static final String SERVICE_NAME = "episodic.v1.RecallService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.RecallRequest,
      episodic.v1.RecallServiceOuterClass.RecallResponse> getRecallMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "Recall",
      requestType = episodic.v1.RecallServiceOuterClass.RecallRequest.class,
      responseType = episodic.v1.RecallServiceOuterClass.RecallResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.RecallRequest,
      episodic.v1.RecallServiceOuterClass.RecallResponse> getRecallMethod() {
    io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.RecallRequest, episodic.v1.RecallServiceOuterClass.RecallResponse> getRecallMethod;
    if ((getRecallMethod = RecallServiceGrpc.getRecallMethod) == null) {
      synchronized (RecallServiceGrpc.class) {
        if ((getRecallMethod = RecallServiceGrpc.getRecallMethod) == null) {
          RecallServiceGrpc.getRecallMethod = getRecallMethod =
              io.grpc.MethodDescriptor.<episodic.v1.RecallServiceOuterClass.RecallRequest, episodic.v1.RecallServiceOuterClass.RecallResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "Recall"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.RecallRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.RecallResponse.getDefaultInstance()))
              .setSchemaDescriptor(new RecallServiceMethodDescriptorSupplier("Recall"))
              .build();
        }
      }
    }
    return getRecallMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.ListEpisodesRequest,
      episodic.v1.RecallServiceOuterClass.ListEpisodesResponse> getListEpisodesMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListEpisodes",
      requestType = episodic.v1.RecallServiceOuterClass.ListEpisodesRequest.class,
      responseType = episodic.v1.RecallServiceOuterClass.ListEpisodesResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.ListEpisodesRequest,
      episodic.v1.RecallServiceOuterClass.ListEpisodesResponse> getListEpisodesMethod() {
    io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.ListEpisodesRequest, episodic.v1.RecallServiceOuterClass.ListEpisodesResponse> getListEpisodesMethod;
    if ((getListEpisodesMethod = RecallServiceGrpc.getListEpisodesMethod) == null) {
      synchronized (RecallServiceGrpc.class) {
        if ((getListEpisodesMethod = RecallServiceGrpc.getListEpisodesMethod) == null) {
          RecallServiceGrpc.getListEpisodesMethod = getListEpisodesMethod =
              io.grpc.MethodDescriptor.<episodic.v1.RecallServiceOuterClass.ListEpisodesRequest, episodic.v1.RecallServiceOuterClass.ListEpisodesResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListEpisodes"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.ListEpisodesRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.ListEpisodesResponse.getDefaultInstance()))
              .setSchemaDescriptor(new RecallServiceMethodDescriptorSupplier("ListEpisodes"))
              .build();
        }
      }
    }
    return getListEpisodesMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.SearchEpisodesRequest,
      episodic.v1.RecallServiceOuterClass.SearchEpisodesResponse> getSearchEpisodesMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "SearchEpisodes",
      requestType = episodic.v1.RecallServiceOuterClass.SearchEpisodesRequest.class,
      responseType = episodic.v1.RecallServiceOuterClass.SearchEpisodesResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.SearchEpisodesRequest,
      episodic.v1.RecallServiceOuterClass.SearchEpisodesResponse> getSearchEpisodesMethod() {
    io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.SearchEpisodesRequest, episodic.v1.RecallServiceOuterClass.SearchEpisodesResponse> getSearchEpisodesMethod;
    if ((getSearchEpisodesMethod = RecallServiceGrpc.getSearchEpisodesMethod) == null) {
      synchronized (RecallServiceGrpc.class) {
        if ((getSearchEpisodesMethod = RecallServiceGrpc.getSearchEpisodesMethod) == null) {
          RecallServiceGrpc.getSearchEpisodesMethod = getSearchEpisodesMethod =
              io.grpc.MethodDescriptor.<episodic.v1.RecallServiceOuterClass.SearchEpisodesRequest, episodic.v1.RecallServiceOuterClass.SearchEpisodesResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "SearchEpisodes"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.SearchEpisodesRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.SearchEpisodesResponse.getDefaultInstance()))
              .setSchemaDescriptor(new RecallServiceMethodDescriptorSupplier("SearchEpisodes"))
              .build();
        }
      }
    }
    return getSearchEpisodesMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.GetEpisodeRequest,
      episodic.v1.RecallServiceOuterClass.GetEpisodeResponse> getGetEpisodeMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetEpisode",
      requestType = episodic.v1.RecallServiceOuterClass.GetEpisodeRequest.class,
      responseType = episodic.v1.RecallServiceOuterClass.GetEpisodeResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.GetEpisodeRequest,
      episodic.v1.RecallServiceOuterClass.GetEpisodeResponse> getGetEpisodeMethod() {
    io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.GetEpisodeRequest, episodic.v1.RecallServiceOuterClass.GetEpisodeResponse> getGetEpisodeMethod;
    if ((getGetEpisodeMethod = RecallServiceGrpc.getGetEpisodeMethod) == null) {
      synchronized (RecallServiceGrpc.class) {
        if ((getGetEpisodeMethod = RecallServiceGrpc.getGetEpisodeMethod) == null) {
          RecallServiceGrpc.getGetEpisodeMethod = getGetEpisodeMethod =
              io.grpc.MethodDescriptor.<episodic.v1.RecallServiceOuterClass.GetEpisodeRequest, episodic.v1.RecallServiceOuterClass.GetEpisodeResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetEpisode"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.GetEpisodeRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.GetEpisodeResponse.getDefaultInstance()))
              .setSchemaDescriptor(new RecallServiceMethodDescriptorSupplier("GetEpisode"))
              .build();
        }
      }
    }
    return getGetEpisodeMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.ListProceduresRequest,
      episodic.v1.RecallServiceOuterClass.ListProceduresResponse> getListProceduresMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListProcedures",
      requestType = episodic.v1.RecallServiceOuterClass.ListProceduresRequest.class,
      responseType = episodic.v1.RecallServiceOuterClass.ListProceduresResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.ListProceduresRequest,
      episodic.v1.RecallServiceOuterClass.ListProceduresResponse> getListProceduresMethod() {
    io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.ListProceduresRequest, episodic.v1.RecallServiceOuterClass.ListProceduresResponse> getListProceduresMethod;
    if ((getListProceduresMethod = RecallServiceGrpc.getListProceduresMethod) == null) {
      synchronized (RecallServiceGrpc.class) {
        if ((getListProceduresMethod = RecallServiceGrpc.getListProceduresMethod) == null) {
          RecallServiceGrpc.getListProceduresMethod = getListProceduresMethod =
              io.grpc.MethodDescriptor.<episodic.v1.RecallServiceOuterClass.ListProceduresRequest, episodic.v1.RecallServiceOuterClass.ListProceduresResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListProcedures"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.ListProceduresRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.ListProceduresResponse.getDefaultInstance()))
              .setSchemaDescriptor(new RecallServiceMethodDescriptorSupplier("ListProcedures"))
              .build();
        }
      }
    }
    return getListProceduresMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.GetProcedureRequest,
      episodic.v1.RecallServiceOuterClass.GetProcedureResponse> getGetProcedureMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetProcedure",
      requestType = episodic.v1.RecallServiceOuterClass.GetProcedureRequest.class,
      responseType = episodic.v1.RecallServiceOuterClass.GetProcedureResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.GetProcedureRequest,
      episodic.v1.RecallServiceOuterClass.GetProcedureResponse> getGetProcedureMethod() {
    io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.GetProcedureRequest, episodic.v1.RecallServiceOuterClass.GetProcedureResponse> getGetProcedureMethod;
    if ((getGetProcedureMethod = RecallServiceGrpc.getGetProcedureMethod) == null) {
      synchronized (RecallServiceGrpc.class) {
        if ((getGetProcedureMethod = RecallServiceGrpc.getGetProcedureMethod) == null) {
          RecallServiceGrpc.getGetProcedureMethod = getGetProcedureMethod =
              io.grpc.MethodDescriptor.<episodic.v1.RecallServiceOuterClass.GetProcedureRequest, episodic.v1.RecallServiceOuterClass.GetProcedureResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetProcedure"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.GetProcedureRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.GetProcedureResponse.getDefaultInstance()))
              .setSchemaDescriptor(new RecallServiceMethodDescriptorSupplier("GetProcedure"))
              .build();
        }
      }
    }
    return getGetProcedureMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.EntityTimelineRequest,
      episodic.v1.RecallServiceOuterClass.EntityTimelineResponse> getEntityTimelineMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "EntityTimeline",
      requestType = episodic.v1.RecallServiceOuterClass.EntityTimelineRequest.class,
      responseType = episodic.v1.RecallServiceOuterClass.EntityTimelineResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.EntityTimelineRequest,
      episodic.v1.RecallServiceOuterClass.EntityTimelineResponse> getEntityTimelineMethod() {
    io.grpc.MethodDescriptor<episodic.v1.RecallServiceOuterClass.EntityTimelineRequest, episodic.v1.RecallServiceOuterClass.EntityTimelineResponse> getEntityTimelineMethod;
    if ((getEntityTimelineMethod = RecallServiceGrpc.getEntityTimelineMethod) == null) {
      synchronized (RecallServiceGrpc.class) {
        if ((getEntityTimelineMethod = RecallServiceGrpc.getEntityTimelineMethod) == null) {
          RecallServiceGrpc.getEntityTimelineMethod = getEntityTimelineMethod =
              io.grpc.MethodDescriptor.<episodic.v1.RecallServiceOuterClass.EntityTimelineRequest, episodic.v1.RecallServiceOuterClass.EntityTimelineResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "EntityTimeline"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.EntityTimelineRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.RecallServiceOuterClass.EntityTimelineResponse.getDefaultInstance()))
              .setSchemaDescriptor(new RecallServiceMethodDescriptorSupplier("EntityTimeline"))
              .build();
        }
      }
    }
    return getEntityTimelineMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static RecallServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RecallServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RecallServiceStub>() {
        @java.lang.Override
        public RecallServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RecallServiceStub(channel, callOptions);
        }
      };
    return RecallServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static RecallServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RecallServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RecallServiceBlockingStub>() {
        @java.lang.Override
        public RecallServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RecallServiceBlockingStub(channel, callOptions);
        }
      };
    return RecallServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static RecallServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<RecallServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<RecallServiceFutureStub>() {
        @java.lang.Override
        public RecallServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new RecallServiceFutureStub(channel, callOptions);
        }
      };
    return RecallServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Recall is the read path agents call on every turn: the right episodes, by meaning and
   * by time, plus the admin reads.
   * </pre>
   */
  public static abstract class RecallServiceImplBase implements io.grpc.BindableService {

    /**
     * <pre>
     * Returns the dataset's most relevant current episodes (seed 000, "Retrieval").
     * </pre>
     */
    public void recall(episodic.v1.RecallServiceOuterClass.RecallRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.RecallResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRecallMethod(), responseObserver);
    }

    /**
     * <pre>
     * Pages through a dataset's episodes, newest first, optionally by status. Events
     * (kind EPISODE_KIND_EVENT) are listed too, by when they occurred, unless the status
     * filter is other than completed.
     * </pre>
     */
    public void listEpisodes(episodic.v1.RecallServiceOuterClass.ListEpisodesRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.ListEpisodesResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListEpisodesMethod(), responseObserver);
    }

    /**
     * <pre>
     * Finds a dataset's current episodes (and events) by text.
     * </pre>
     */
    public void searchEpisodes(episodic.v1.RecallServiceOuterClass.SearchEpisodesRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.SearchEpisodesResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getSearchEpisodesMethod(), responseObserver);
    }

    /**
     * <pre>
     * Returns one episode in any status (archived ones too, for provenance), or an event
     * (kind EPISODE_KIND_EVENT) by the id Recall and ListEpisodes list it under.
     * </pre>
     */
    public void getEpisode(episodic.v1.RecallServiceOuterClass.GetEpisodeRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.GetEpisodeResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetEpisodeMethod(), responseObserver);
    }

    /**
     * <pre>
     * Pages through a dataset's procedures, most supported first.
     * </pre>
     */
    public void listProcedures(episodic.v1.RecallServiceOuterClass.ListProceduresRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.ListProceduresResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListProceduresMethod(), responseObserver);
    }

    /**
     * <pre>
     * Returns one procedure.
     * </pre>
     */
    public void getProcedure(episodic.v1.RecallServiceOuterClass.GetProcedureRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.GetProcedureResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetProcedureMethod(), responseObserver);
    }

    /**
     * <pre>
     * Everything about one entity, in order: the dataset's current episodes that mention it
     * under any of its aliases, oldest first, paged.
     * </pre>
     */
    public void entityTimeline(episodic.v1.RecallServiceOuterClass.EntityTimelineRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.EntityTimelineResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getEntityTimelineMethod(), responseObserver);
    }

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
          .addMethod(
            getRecallMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.RecallServiceOuterClass.RecallRequest,
                episodic.v1.RecallServiceOuterClass.RecallResponse>(
                  this, METHODID_RECALL)))
          .addMethod(
            getListEpisodesMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.RecallServiceOuterClass.ListEpisodesRequest,
                episodic.v1.RecallServiceOuterClass.ListEpisodesResponse>(
                  this, METHODID_LIST_EPISODES)))
          .addMethod(
            getSearchEpisodesMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.RecallServiceOuterClass.SearchEpisodesRequest,
                episodic.v1.RecallServiceOuterClass.SearchEpisodesResponse>(
                  this, METHODID_SEARCH_EPISODES)))
          .addMethod(
            getGetEpisodeMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.RecallServiceOuterClass.GetEpisodeRequest,
                episodic.v1.RecallServiceOuterClass.GetEpisodeResponse>(
                  this, METHODID_GET_EPISODE)))
          .addMethod(
            getListProceduresMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.RecallServiceOuterClass.ListProceduresRequest,
                episodic.v1.RecallServiceOuterClass.ListProceduresResponse>(
                  this, METHODID_LIST_PROCEDURES)))
          .addMethod(
            getGetProcedureMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.RecallServiceOuterClass.GetProcedureRequest,
                episodic.v1.RecallServiceOuterClass.GetProcedureResponse>(
                  this, METHODID_GET_PROCEDURE)))
          .addMethod(
            getEntityTimelineMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.RecallServiceOuterClass.EntityTimelineRequest,
                episodic.v1.RecallServiceOuterClass.EntityTimelineResponse>(
                  this, METHODID_ENTITY_TIMELINE)))
          .build();
    }
  }

  /**
   * <pre>
   * Recall is the read path agents call on every turn: the right episodes, by meaning and
   * by time, plus the admin reads.
   * </pre>
   */
  public static final class RecallServiceStub extends io.grpc.stub.AbstractAsyncStub<RecallServiceStub> {
    private RecallServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RecallServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RecallServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Returns the dataset's most relevant current episodes (seed 000, "Retrieval").
     * </pre>
     */
    public void recall(episodic.v1.RecallServiceOuterClass.RecallRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.RecallResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRecallMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Pages through a dataset's episodes, newest first, optionally by status. Events
     * (kind EPISODE_KIND_EVENT) are listed too, by when they occurred, unless the status
     * filter is other than completed.
     * </pre>
     */
    public void listEpisodes(episodic.v1.RecallServiceOuterClass.ListEpisodesRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.ListEpisodesResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListEpisodesMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Finds a dataset's current episodes (and events) by text.
     * </pre>
     */
    public void searchEpisodes(episodic.v1.RecallServiceOuterClass.SearchEpisodesRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.SearchEpisodesResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getSearchEpisodesMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Returns one episode in any status (archived ones too, for provenance), or an event
     * (kind EPISODE_KIND_EVENT) by the id Recall and ListEpisodes list it under.
     * </pre>
     */
    public void getEpisode(episodic.v1.RecallServiceOuterClass.GetEpisodeRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.GetEpisodeResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetEpisodeMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Pages through a dataset's procedures, most supported first.
     * </pre>
     */
    public void listProcedures(episodic.v1.RecallServiceOuterClass.ListProceduresRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.ListProceduresResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListProceduresMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Returns one procedure.
     * </pre>
     */
    public void getProcedure(episodic.v1.RecallServiceOuterClass.GetProcedureRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.GetProcedureResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetProcedureMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Everything about one entity, in order: the dataset's current episodes that mention it
     * under any of its aliases, oldest first, paged.
     * </pre>
     */
    public void entityTimeline(episodic.v1.RecallServiceOuterClass.EntityTimelineRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.EntityTimelineResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getEntityTimelineMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * <pre>
   * Recall is the read path agents call on every turn: the right episodes, by meaning and
   * by time, plus the admin reads.
   * </pre>
   */
  public static final class RecallServiceBlockingStub extends io.grpc.stub.AbstractBlockingStub<RecallServiceBlockingStub> {
    private RecallServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RecallServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RecallServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Returns the dataset's most relevant current episodes (seed 000, "Retrieval").
     * </pre>
     */
    public episodic.v1.RecallServiceOuterClass.RecallResponse recall(episodic.v1.RecallServiceOuterClass.RecallRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRecallMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pages through a dataset's episodes, newest first, optionally by status. Events
     * (kind EPISODE_KIND_EVENT) are listed too, by when they occurred, unless the status
     * filter is other than completed.
     * </pre>
     */
    public episodic.v1.RecallServiceOuterClass.ListEpisodesResponse listEpisodes(episodic.v1.RecallServiceOuterClass.ListEpisodesRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListEpisodesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Finds a dataset's current episodes (and events) by text.
     * </pre>
     */
    public episodic.v1.RecallServiceOuterClass.SearchEpisodesResponse searchEpisodes(episodic.v1.RecallServiceOuterClass.SearchEpisodesRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getSearchEpisodesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Returns one episode in any status (archived ones too, for provenance), or an event
     * (kind EPISODE_KIND_EVENT) by the id Recall and ListEpisodes list it under.
     * </pre>
     */
    public episodic.v1.RecallServiceOuterClass.GetEpisodeResponse getEpisode(episodic.v1.RecallServiceOuterClass.GetEpisodeRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetEpisodeMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pages through a dataset's procedures, most supported first.
     * </pre>
     */
    public episodic.v1.RecallServiceOuterClass.ListProceduresResponse listProcedures(episodic.v1.RecallServiceOuterClass.ListProceduresRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListProceduresMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Returns one procedure.
     * </pre>
     */
    public episodic.v1.RecallServiceOuterClass.GetProcedureResponse getProcedure(episodic.v1.RecallServiceOuterClass.GetProcedureRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetProcedureMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Everything about one entity, in order: the dataset's current episodes that mention it
     * under any of its aliases, oldest first, paged.
     * </pre>
     */
    public episodic.v1.RecallServiceOuterClass.EntityTimelineResponse entityTimeline(episodic.v1.RecallServiceOuterClass.EntityTimelineRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getEntityTimelineMethod(), getCallOptions(), request);
    }
  }

  /**
   * <pre>
   * Recall is the read path agents call on every turn: the right episodes, by meaning and
   * by time, plus the admin reads.
   * </pre>
   */
  public static final class RecallServiceFutureStub extends io.grpc.stub.AbstractFutureStub<RecallServiceFutureStub> {
    private RecallServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected RecallServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new RecallServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Returns the dataset's most relevant current episodes (seed 000, "Retrieval").
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.RecallServiceOuterClass.RecallResponse> recall(
        episodic.v1.RecallServiceOuterClass.RecallRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRecallMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Pages through a dataset's episodes, newest first, optionally by status. Events
     * (kind EPISODE_KIND_EVENT) are listed too, by when they occurred, unless the status
     * filter is other than completed.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.RecallServiceOuterClass.ListEpisodesResponse> listEpisodes(
        episodic.v1.RecallServiceOuterClass.ListEpisodesRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListEpisodesMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Finds a dataset's current episodes (and events) by text.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.RecallServiceOuterClass.SearchEpisodesResponse> searchEpisodes(
        episodic.v1.RecallServiceOuterClass.SearchEpisodesRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getSearchEpisodesMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Returns one episode in any status (archived ones too, for provenance), or an event
     * (kind EPISODE_KIND_EVENT) by the id Recall and ListEpisodes list it under.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.RecallServiceOuterClass.GetEpisodeResponse> getEpisode(
        episodic.v1.RecallServiceOuterClass.GetEpisodeRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetEpisodeMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Pages through a dataset's procedures, most supported first.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.RecallServiceOuterClass.ListProceduresResponse> listProcedures(
        episodic.v1.RecallServiceOuterClass.ListProceduresRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListProceduresMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Returns one procedure.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.RecallServiceOuterClass.GetProcedureResponse> getProcedure(
        episodic.v1.RecallServiceOuterClass.GetProcedureRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetProcedureMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Everything about one entity, in order: the dataset's current episodes that mention it
     * under any of its aliases, oldest first, paged.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.RecallServiceOuterClass.EntityTimelineResponse> entityTimeline(
        episodic.v1.RecallServiceOuterClass.EntityTimelineRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getEntityTimelineMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_RECALL = 0;
  private static final int METHODID_LIST_EPISODES = 1;
  private static final int METHODID_SEARCH_EPISODES = 2;
  private static final int METHODID_GET_EPISODE = 3;
  private static final int METHODID_LIST_PROCEDURES = 4;
  private static final int METHODID_GET_PROCEDURE = 5;
  private static final int METHODID_ENTITY_TIMELINE = 6;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final RecallServiceImplBase serviceImpl;
    private final int methodId;

    MethodHandlers(RecallServiceImplBase serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_RECALL:
          serviceImpl.recall((episodic.v1.RecallServiceOuterClass.RecallRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.RecallResponse>) responseObserver);
          break;
        case METHODID_LIST_EPISODES:
          serviceImpl.listEpisodes((episodic.v1.RecallServiceOuterClass.ListEpisodesRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.ListEpisodesResponse>) responseObserver);
          break;
        case METHODID_SEARCH_EPISODES:
          serviceImpl.searchEpisodes((episodic.v1.RecallServiceOuterClass.SearchEpisodesRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.SearchEpisodesResponse>) responseObserver);
          break;
        case METHODID_GET_EPISODE:
          serviceImpl.getEpisode((episodic.v1.RecallServiceOuterClass.GetEpisodeRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.GetEpisodeResponse>) responseObserver);
          break;
        case METHODID_LIST_PROCEDURES:
          serviceImpl.listProcedures((episodic.v1.RecallServiceOuterClass.ListProceduresRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.ListProceduresResponse>) responseObserver);
          break;
        case METHODID_GET_PROCEDURE:
          serviceImpl.getProcedure((episodic.v1.RecallServiceOuterClass.GetProcedureRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.GetProcedureResponse>) responseObserver);
          break;
        case METHODID_ENTITY_TIMELINE:
          serviceImpl.entityTimeline((episodic.v1.RecallServiceOuterClass.EntityTimelineRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.RecallServiceOuterClass.EntityTimelineResponse>) responseObserver);
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

  private static abstract class RecallServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    RecallServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return episodic.v1.RecallServiceOuterClass.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("RecallService");
    }
  }

  private static final class RecallServiceFileDescriptorSupplier
      extends RecallServiceBaseDescriptorSupplier {
    RecallServiceFileDescriptorSupplier() {}
  }

  private static final class RecallServiceMethodDescriptorSupplier
      extends RecallServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final String methodName;

    RecallServiceMethodDescriptorSupplier(String methodName) {
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
      synchronized (RecallServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new RecallServiceFileDescriptorSupplier())
              .addMethod(getRecallMethod())
              .addMethod(getListEpisodesMethod())
              .addMethod(getSearchEpisodesMethod())
              .addMethod(getGetEpisodeMethod())
              .addMethod(getListProceduresMethod())
              .addMethod(getGetProcedureMethod())
              .addMethod(getEntityTimelineMethod())
              .build();
        }
      }
    }
    return result;
  }
}
