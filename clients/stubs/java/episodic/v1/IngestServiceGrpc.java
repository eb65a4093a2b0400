package episodic.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * Ingest owns threads and messages: the write path agents call on every turn.
 * </pre>
 */
@javax.annotation.Generated(
    value = "by gRPC proto compiler",
    comments = "Source: episodic/v1/ingest_service.proto")
@io.grpc.stub.annotations.GrpcGenerated
public final class IngestServiceGrpc {

  private IngestServiceGrpc() {}

  public static final String SERVICE_NAME = "episodic.v1.IngestService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.CreateThreadRequest,
      episodic.v1.IngestServiceOuterClass.CreateThreadResponse> getCreateThreadMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CreateThread",
      requestType = episodic.v1.IngestServiceOuterClass.CreateThreadRequest.class,
      responseType = episodic.v1.IngestServiceOuterClass.CreateThreadResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.CreateThreadRequest,
      episodic.v1.IngestServiceOuterClass.CreateThreadResponse> getCreateThreadMethod() {
    io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.CreateThreadRequest, episodic.v1.IngestServiceOuterClass.CreateThreadResponse> getCreateThreadMethod;
    if ((getCreateThreadMethod = IngestServiceGrpc.getCreateThreadMethod) == null) {
      synchronized (IngestServiceGrpc.class) {
        if ((getCreateThreadMethod = IngestServiceGrpc.getCreateThreadMethod) == null) {
          IngestServiceGrpc.getCreateThreadMethod = getCreateThreadMethod =
              io.grpc.MethodDescriptor.<episodic.v1.IngestServiceOuterClass.CreateThreadRequest, episodic.v1.IngestServiceOuterClass.CreateThreadResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CreateThread"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.CreateThreadRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.CreateThreadResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestServiceMethodDescriptorSupplier("CreateThread"))
              .build();
        }
      }
    }
    return getCreateThreadMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.AddMessagesRequest,
      episodic.v1.IngestServiceOuterClass.AddMessagesResponse> getAddMessagesMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "AddMessages",
      requestType = episodic.v1.IngestServiceOuterClass.AddMessagesRequest.class,
      responseType = episodic.v1.IngestServiceOuterClass.AddMessagesResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.AddMessagesRequest,
      episodic.v1.IngestServiceOuterClass.AddMessagesResponse> getAddMessagesMethod() {
    io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.AddMessagesRequest, episodic.v1.IngestServiceOuterClass.AddMessagesResponse> getAddMessagesMethod;
    if ((getAddMessagesMethod = IngestServiceGrpc.getAddMessagesMethod) == null) {
      synchronized (IngestServiceGrpc.class) {
        if ((getAddMessagesMethod = IngestServiceGrpc.getAddMessagesMethod) == null) {
          IngestServiceGrpc.getAddMessagesMethod = getAddMessagesMethod =
              io.grpc.MethodDescriptor.<episodic.v1.IngestServiceOuterClass.AddMessagesRequest, episodic.v1.IngestServiceOuterClass.AddMessagesResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "AddMessages"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.AddMessagesRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.AddMessagesResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestServiceMethodDescriptorSupplier("AddMessages"))
              .build();
        }
      }
    }
    return getAddMessagesMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.EndThreadRequest,
      episodic.v1.IngestServiceOuterClass.EndThreadResponse> getEndThreadMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "EndThread",
      requestType = episodic.v1.IngestServiceOuterClass.EndThreadRequest.class,
      responseType = episodic.v1.IngestServiceOuterClass.EndThreadResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.EndThreadRequest,
      episodic.v1.IngestServiceOuterClass.EndThreadResponse> getEndThreadMethod() {
    io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.EndThreadRequest, episodic.v1.IngestServiceOuterClass.EndThreadResponse> getEndThreadMethod;
    if ((getEndThreadMethod = IngestServiceGrpc.getEndThreadMethod) == null) {
      synchronized (IngestServiceGrpc.class) {
        if ((getEndThreadMethod = IngestServiceGrpc.getEndThreadMethod) == null) {
          IngestServiceGrpc.getEndThreadMethod = getEndThreadMethod =
              io.grpc.MethodDescriptor.<episodic.v1.IngestServiceOuterClass.EndThreadRequest, episodic.v1.IngestServiceOuterClass.EndThreadResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "EndThread"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.EndThreadRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.EndThreadResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestServiceMethodDescriptorSupplier("EndThread"))
              .build();
        }
      }
    }
    return getEndThreadMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.RecordEventRequest,
      episodic.v1.IngestServiceOuterClass.RecordEventResponse> getRecordEventMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RecordEvent",
      requestType = episodic.v1.IngestServiceOuterClass.RecordEventRequest.class,
      responseType = episodic.v1.IngestServiceOuterClass.RecordEventResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.RecordEventRequest,
      episodic.v1.IngestServiceOuterClass.RecordEventResponse> getRecordEventMethod() {
    io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.RecordEventRequest, episodic.v1.IngestServiceOuterClass.RecordEventResponse> getRecordEventMethod;
    if ((getRecordEventMethod = IngestServiceGrpc.getRecordEventMethod) == null) {
      synchronized (IngestServiceGrpc.class) {
        if ((getRecordEventMethod = IngestServiceGrpc.getRecordEventMethod) == null) {
          IngestServiceGrpc.getRecordEventMethod = getRecordEventMethod =
              io.grpc.MethodDescriptor.<episodic.v1.IngestServiceOuterClass.RecordEventRequest, episodic.v1.IngestServiceOuterClass.RecordEventResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RecordEvent"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.RecordEventRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.RecordEventResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestServiceMethodDescriptorSupplier("RecordEvent"))
              .build();
        }
      }
    }
    return getRecordEventMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.RecordOutcomeRequest,
      episodic.v1.IngestServiceOuterClass.RecordOutcomeResponse> getRecordOutcomeMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RecordOutcome",
      requestType = episodic.v1.IngestServiceOuterClass.RecordOutcomeRequest.class,
      responseType = episodic.v1.IngestServiceOuterClass.RecordOutcomeResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.RecordOutcomeRequest,
      episodic.v1.IngestServiceOuterClass.RecordOutcomeResponse> getRecordOutcomeMethod() {
    io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.RecordOutcomeRequest, episodic.v1.IngestServiceOuterClass.RecordOutcomeResponse> getRecordOutcomeMethod;
    if ((getRecordOutcomeMethod = IngestServiceGrpc.getRecordOutcomeMethod) == null) {
      synchronized (IngestServiceGrpc.class) {
        if ((getRecordOutcomeMethod = IngestServiceGrpc.getRecordOutcomeMethod) == null) {
          IngestServiceGrpc.getRecordOutcomeMethod = getRecordOutcomeMethod =
              io.grpc.MethodDescriptor.<episodic.v1.IngestServiceOuterClass.RecordOutcomeRequest, episodic.v1.IngestServiceOuterClass.RecordOutcomeResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RecordOutcome"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.RecordOutcomeRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.RecordOutcomeResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestServiceMethodDescriptorSupplier("RecordOutcome"))
              .build();
        }
      }
    }
    return getRecordOutcomeMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.GetThreadRequest,
      episodic.v1.IngestServiceOuterClass.GetThreadResponse> getGetThreadMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetThread",
      requestType = episodic.v1.IngestServiceOuterClass.GetThreadRequest.class,
      responseType = episodic.v1.IngestServiceOuterClass.GetThreadResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.GetThreadRequest,
      episodic.v1.IngestServiceOuterClass.GetThreadResponse> getGetThreadMethod() {
    io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.GetThreadRequest, episodic.v1.IngestServiceOuterClass.GetThreadResponse> getGetThreadMethod;
    if ((getGetThreadMethod = IngestServiceGrpc.getGetThreadMethod) == null) {
      synchronized (IngestServiceGrpc.class) {
        if ((getGetThreadMethod = IngestServiceGrpc.getGetThreadMethod) == null) {
          IngestServiceGrpc.getGetThreadMethod = getGetThreadMethod =
              io.grpc.MethodDescriptor.<episodic.v1.IngestServiceOuterClass.GetThreadRequest, episodic.v1.IngestServiceOuterClass.GetThreadResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetThread"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.GetThreadRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.GetThreadResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestServiceMethodDescriptorSupplier("GetThread"))
              .build();
        }
      }
    }
    return getGetThreadMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.ListMessagesRequest,
      episodic.v1.IngestServiceOuterClass.ListMessagesResponse> getListMessagesMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListMessages",
      requestType = episodic.v1.IngestServiceOuterClass.ListMessagesRequest.class,
      responseType = episodic.v1.IngestServiceOuterClass.ListMessagesResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.ListMessagesRequest,
      episodic.v1.IngestServiceOuterClass.ListMessagesResponse> getListMessagesMethod() {
    io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.ListMessagesRequest, episodic.v1.IngestServiceOuterClass.ListMessagesResponse> getListMessagesMethod;
    if ((getListMessagesMethod = IngestServiceGrpc.getListMessagesMethod) == null) {
      synchronized (IngestServiceGrpc.class) {
        if ((getListMessagesMethod = IngestServiceGrpc.getListMessagesMethod) == null) {
          IngestServiceGrpc.getListMessagesMethod = getListMessagesMethod =
              io.grpc.MethodDescriptor.<episodic.v1.IngestServiceOuterClass.ListMessagesRequest, episodic.v1.IngestServiceOuterClass.ListMessagesResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListMessages"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.ListMessagesRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.ListMessagesResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestServiceMethodDescriptorSupplier("ListMessages"))
              .build();
        }
      }
    }
    return getListMessagesMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.ListThreadsRequest,
      episodic.v1.IngestServiceOuterClass.ListThreadsResponse> getListThreadsMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ListThreads",
      requestType = episodic.v1.IngestServiceOuterClass.ListThreadsRequest.class,
      responseType = episodic.v1.IngestServiceOuterClass.ListThreadsResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.ListThreadsRequest,
      episodic.v1.IngestServiceOuterClass.ListThreadsResponse> getListThreadsMethod() {
    io.grpc.MethodDescriptor<episodic.v1.IngestServiceOuterClass.ListThreadsRequest, episodic.v1.IngestServiceOuterClass.ListThreadsResponse> getListThreadsMethod;
    if ((getListThreadsMethod = IngestServiceGrpc.getListThreadsMethod) == null) {
      synchronized (IngestServiceGrpc.class) {
        if ((getListThreadsMethod = IngestServiceGrpc.getListThreadsMethod) == null) {
          IngestServiceGrpc.getListThreadsMethod = getListThreadsMethod =
              io.grpc.MethodDescriptor.<episodic.v1.IngestServiceOuterClass.ListThreadsRequest, episodic.v1.IngestServiceOuterClass.ListThreadsResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ListThreads"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.ListThreadsRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.IngestServiceOuterClass.ListThreadsResponse.getDefaultInstance()))
              .setSchemaDescriptor(new IngestServiceMethodDescriptorSupplier("ListThreads"))
              .build();
        }
      }
    }
    return getListThreadsMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static IngestServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<IngestServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<IngestServiceStub>() {
        @java.lang.Override
        public IngestServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new IngestServiceStub(channel, callOptions);
        }
      };
    return IngestServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static IngestServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<IngestServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<IngestServiceBlockingStub>() {
        @java.lang.Override
        public IngestServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new IngestServiceBlockingStub(channel, callOptions);
        }
      };
    return IngestServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static IngestServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<IngestServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<IngestServiceFutureStub>() {
        @java.lang.Override
        public IngestServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new IngestServiceFutureStub(channel, callOptions);
        }
      };
    return IngestServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * Ingest owns threads and messages: the write path agents call on every turn.
   * </pre>
   */
  public static abstract class IngestServiceImplBase implements io.grpc.BindableService {

    /**
     * <pre>
     * Creates a thread in a dataset. Also tells the Scheduler a new thread started, which
     * pulls the idle timers of the dataset's other threads forward (trigger 2).
     * </pre>
     */
    public void createThread(episodic.v1.IngestServiceOuterClass.CreateThreadRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.CreateThreadResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCreateThreadMethod(), responseObserver);
    }

    /**
     * <pre>
     * Appends one or many messages to one thread. Every message in the answer is durable.
     * </pre>
     */
    public void addMessages(episodic.v1.IngestServiceOuterClass.AddMessagesRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.AddMessagesResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getAddMessagesMethod(), responseObserver);
    }

    /**
     * <pre>
     * Marks a stretch of the thread as finished and queues an episode for it (trigger 1).
     * The thread stays writable: this is a checkpoint, not a close.
     * </pre>
     */
    public void endThread(episodic.v1.IngestServiceOuterClass.EndThreadRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.EndThreadResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getEndThreadMethod(), responseObserver);
    }

    /**
     * <pre>
     * Records an event the agent knows happened (a decision, a tool call, feedback, a
     * milestone, or a type of its own) as an episode of kind EVENT, recalled beside the
     * summarised episodes. Durable when the call returns; embedded shortly after by the
     * Summariser (until then it is found by its words and its time).
     * </pre>
     */
    public void recordEvent(episodic.v1.IngestServiceOuterClass.RecordEventRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.RecordEventResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRecordEventMethod(), responseObserver);
    }

    /**
     * <pre>
     * Records how a thread (or one episode's stretch of it) turned out: success, failure or
     * partial, with an optional score and note. Rewards often arrive late, so it may come
     * before or after the episode exists; sending it again replaces it (the last one stands,
     * each recorded in the audit log). Procedures are learned from successful stretches with
     * tool calls, and failures count against the procedure they match.
     * </pre>
     */
    public void recordOutcome(episodic.v1.IngestServiceOuterClass.RecordOutcomeRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.RecordOutcomeResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRecordOutcomeMethod(), responseObserver);
    }

    /**
     * <pre>
     * Returns one thread.
     * </pre>
     */
    public void getThread(episodic.v1.IngestServiceOuterClass.GetThreadRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.GetThreadResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetThreadMethod(), responseObserver);
    }

    /**
     * <pre>
     * Pages through a thread's messages in sequence order (seed 003's load_session).
     * </pre>
     */
    public void listMessages(episodic.v1.IngestServiceOuterClass.ListMessagesRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.ListMessagesResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListMessagesMethod(), responseObserver);
    }

    /**
     * <pre>
     * Pages through a dataset's threads, most recently active first (seed 003's recent_sessions).
     * </pre>
     */
    public void listThreads(episodic.v1.IngestServiceOuterClass.ListThreadsRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.ListThreadsResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getListThreadsMethod(), responseObserver);
    }

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
          .addMethod(
            getCreateThreadMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.IngestServiceOuterClass.CreateThreadRequest,
                episodic.v1.IngestServiceOuterClass.CreateThreadResponse>(
                  this, METHODID_CREATE_THREAD)))
          .addMethod(
            getAddMessagesMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.IngestServiceOuterClass.AddMessagesRequest,
                episodic.v1.IngestServiceOuterClass.AddMessagesResponse>(
                  this, METHODID_ADD_MESSAGES)))
          .addMethod(
            getEndThreadMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.IngestServiceOuterClass.EndThreadRequest,
                episodic.v1.IngestServiceOuterClass.EndThreadResponse>(
                  this, METHODID_END_THREAD)))
          .addMethod(
            getRecordEventMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.IngestServiceOuterClass.RecordEventRequest,
                episodic.v1.IngestServiceOuterClass.RecordEventResponse>(
                  this, METHODID_RECORD_EVENT)))
          .addMethod(
            getRecordOutcomeMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.IngestServiceOuterClass.RecordOutcomeRequest,
                episodic.v1.IngestServiceOuterClass.RecordOutcomeResponse>(
                  this, METHODID_RECORD_OUTCOME)))
          .addMethod(
            getGetThreadMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.IngestServiceOuterClass.GetThreadRequest,
                episodic.v1.IngestServiceOuterClass.GetThreadResponse>(
                  this, METHODID_GET_THREAD)))
          .addMethod(
            getListMessagesMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.IngestServiceOuterClass.ListMessagesRequest,
                episodic.v1.IngestServiceOuterClass.ListMessagesResponse>(
                  this, METHODID_LIST_MESSAGES)))
          .addMethod(
            getListThreadsMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.IngestServiceOuterClass.ListThreadsRequest,
                episodic.v1.IngestServiceOuterClass.ListThreadsResponse>(
                  this, METHODID_LIST_THREADS)))
          .build();
    }
  }

  /**
   * <pre>
   * Ingest owns threads and messages: the write path agents call on every turn.
   * </pre>
   */
  public static final class IngestServiceStub extends io.grpc.stub.AbstractAsyncStub<IngestServiceStub> {
    private IngestServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected IngestServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new IngestServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a thread in a dataset. Also tells the Scheduler a new thread started, which
     * pulls the idle timers of the dataset's other threads forward (trigger 2).
     * </pre>
     */
    public void createThread(episodic.v1.IngestServiceOuterClass.CreateThreadRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.CreateThreadResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCreateThreadMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Appends one or many messages to one thread. Every message in the answer is durable.
     * </pre>
     */
    public void addMessages(episodic.v1.IngestServiceOuterClass.AddMessagesRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.AddMessagesResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getAddMessagesMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Marks a stretch of the thread as finished and queues an episode for it (trigger 1).
     * The thread stays writable: this is a checkpoint, not a close.
     * </pre>
     */
    public void endThread(episodic.v1.IngestServiceOuterClass.EndThreadRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.EndThreadResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getEndThreadMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Records an event the agent knows happened (a decision, a tool call, feedback, a
     * milestone, or a type of its own) as an episode of kind EVENT, recalled beside the
     * summarised episodes. Durable when the call returns; embedded shortly after by the
     * Summariser (until then it is found by its words and its time).
     * </pre>
     */
    public void recordEvent(episodic.v1.IngestServiceOuterClass.RecordEventRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.RecordEventResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRecordEventMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Records how a thread (or one episode's stretch of it) turned out: success, failure or
     * partial, with an optional score and note. Rewards often arrive late, so it may come
     * before or after the episode exists; sending it again replaces it (the last one stands,
     * each recorded in the audit log). Procedures are learned from successful stretches with
     * tool calls, and failures count against the procedure they match.
     * </pre>
     */
    public void recordOutcome(episodic.v1.IngestServiceOuterClass.RecordOutcomeRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.RecordOutcomeResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRecordOutcomeMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Returns one thread.
     * </pre>
     */
    public void getThread(episodic.v1.IngestServiceOuterClass.GetThreadRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.GetThreadResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetThreadMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Pages through a thread's messages in sequence order (seed 003's load_session).
     * </pre>
     */
    public void listMessages(episodic.v1.IngestServiceOuterClass.ListMessagesRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.ListMessagesResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListMessagesMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Pages through a dataset's threads, most recently active first (seed 003's recent_sessions).
     * </pre>
     */
    public void listThreads(episodic.v1.IngestServiceOuterClass.ListThreadsRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.ListThreadsResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getListThreadsMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * <pre>
   * Ingest owns threads and messages: the write path agents call on every turn.
   * </pre>
   */
  public static final class IngestServiceBlockingStub extends io.grpc.stub.AbstractBlockingStub<IngestServiceBlockingStub> {
    private IngestServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected IngestServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new IngestServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a thread in a dataset. Also tells the Scheduler a new thread started, which
     * pulls the idle timers of the dataset's other threads forward (trigger 2).
     * </pre>
     */
    public episodic.v1.IngestServiceOuterClass.CreateThreadResponse createThread(episodic.v1.IngestServiceOuterClass.CreateThreadRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCreateThreadMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Appends one or many messages to one thread. Every message in the answer is durable.
     * </pre>
     */
    public episodic.v1.IngestServiceOuterClass.AddMessagesResponse addMessages(episodic.v1.IngestServiceOuterClass.AddMessagesRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getAddMessagesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Marks a stretch of the thread as finished and queues an episode for it (trigger 1).
     * The thread stays writable: this is a checkpoint, not a close.
     * </pre>
     */
    public episodic.v1.IngestServiceOuterClass.EndThreadResponse endThread(episodic.v1.IngestServiceOuterClass.EndThreadRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getEndThreadMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Records an event the agent knows happened (a decision, a tool call, feedback, a
     * milestone, or a type of its own) as an episode of kind EVENT, recalled beside the
     * summarised episodes. Durable when the call returns; embedded shortly after by the
     * Summariser (until then it is found by its words and its time).
     * </pre>
     */
    public episodic.v1.IngestServiceOuterClass.RecordEventResponse recordEvent(episodic.v1.IngestServiceOuterClass.RecordEventRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRecordEventMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Records how a thread (or one episode's stretch of it) turned out: success, failure or
     * partial, with an optional score and note. Rewards often arrive late, so it may come
     * before or after the episode exists; sending it again replaces it (the last one stands,
     * each recorded in the audit log). Procedures are learned from successful stretches with
     * tool calls, and failures count against the procedure they match.
     * </pre>
     */
    public episodic.v1.IngestServiceOuterClass.RecordOutcomeResponse recordOutcome(episodic.v1.IngestServiceOuterClass.RecordOutcomeRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRecordOutcomeMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Returns one thread.
     * </pre>
     */
    public episodic.v1.IngestServiceOuterClass.GetThreadResponse getThread(episodic.v1.IngestServiceOuterClass.GetThreadRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetThreadMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pages through a thread's messages in sequence order (seed 003's load_session).
     * </pre>
     */
    public episodic.v1.IngestServiceOuterClass.ListMessagesResponse listMessages(episodic.v1.IngestServiceOuterClass.ListMessagesRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListMessagesMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Pages through a dataset's threads, most recently active first (seed 003's recent_sessions).
     * </pre>
     */
    public episodic.v1.IngestServiceOuterClass.ListThreadsResponse listThreads(episodic.v1.IngestServiceOuterClass.ListThreadsRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getListThreadsMethod(), getCallOptions(), request);
    }
  }

  /**
   * <pre>
   * Ingest owns threads and messages: the write path agents call on every turn.
   * </pre>
   */
  public static final class IngestServiceFutureStub extends io.grpc.stub.AbstractFutureStub<IngestServiceFutureStub> {
    private IngestServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected IngestServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new IngestServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Creates a thread in a dataset. Also tells the Scheduler a new thread started, which
     * pulls the idle timers of the dataset's other threads forward (trigger 2).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.IngestServiceOuterClass.CreateThreadResponse> createThread(
        episodic.v1.IngestServiceOuterClass.CreateThreadRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCreateThreadMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Appends one or many messages to one thread. Every message in the answer is durable.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.IngestServiceOuterClass.AddMessagesResponse> addMessages(
        episodic.v1.IngestServiceOuterClass.AddMessagesRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getAddMessagesMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Marks a stretch of the thread as finished and queues an episode for it (trigger 1).
     * The thread stays writable: this is a checkpoint, not a close.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.IngestServiceOuterClass.EndThreadResponse> endThread(
        episodic.v1.IngestServiceOuterClass.EndThreadRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getEndThreadMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Records an event the agent knows happened (a decision, a tool call, feedback, a
     * milestone, or a type of its own) as an episode of kind EVENT, recalled beside the
     * summarised episodes. Durable when the call returns; embedded shortly after by the
     * Summariser (until then it is found by its words and its time).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.IngestServiceOuterClass.RecordEventResponse> recordEvent(
        episodic.v1.IngestServiceOuterClass.RecordEventRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRecordEventMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Records how a thread (or one episode's stretch of it) turned out: success, failure or
     * partial, with an optional score and note. Rewards often arrive late, so it may come
     * before or after the episode exists; sending it again replaces it (the last one stands,
     * each recorded in the audit log). Procedures are learned from successful stretches with
     * tool calls, and failures count against the procedure they match.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.IngestServiceOuterClass.RecordOutcomeResponse> recordOutcome(
        episodic.v1.IngestServiceOuterClass.RecordOutcomeRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRecordOutcomeMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Returns one thread.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.IngestServiceOuterClass.GetThreadResponse> getThread(
        episodic.v1.IngestServiceOuterClass.GetThreadRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetThreadMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Pages through a thread's messages in sequence order (seed 003's load_session).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.IngestServiceOuterClass.ListMessagesResponse> listMessages(
        episodic.v1.IngestServiceOuterClass.ListMessagesRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListMessagesMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Pages through a dataset's threads, most recently active first (seed 003's recent_sessions).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.IngestServiceOuterClass.ListThreadsResponse> listThreads(
        episodic.v1.IngestServiceOuterClass.ListThreadsRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getListThreadsMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_CREATE_THREAD = 0;
  private static final int METHODID_ADD_MESSAGES = 1;
  private static final int METHODID_END_THREAD = 2;
  private static final int METHODID_RECORD_EVENT = 3;
  private static final int METHODID_RECORD_OUTCOME = 4;
  private static final int METHODID_GET_THREAD = 5;
  private static final int METHODID_LIST_MESSAGES = 6;
  private static final int METHODID_LIST_THREADS = 7;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final IngestServiceImplBase serviceImpl;
    private final int methodId;

    MethodHandlers(IngestServiceImplBase serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_CREATE_THREAD:
          serviceImpl.createThread((episodic.v1.IngestServiceOuterClass.CreateThreadRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.CreateThreadResponse>) responseObserver);
          break;
        case METHODID_ADD_MESSAGES:
          serviceImpl.addMessages((episodic.v1.IngestServiceOuterClass.AddMessagesRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.AddMessagesResponse>) responseObserver);
          break;
        case METHODID_END_THREAD:
          serviceImpl.endThread((episodic.v1.IngestServiceOuterClass.EndThreadRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.EndThreadResponse>) responseObserver);
          break;
        case METHODID_RECORD_EVENT:
          serviceImpl.recordEvent((episodic.v1.IngestServiceOuterClass.RecordEventRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.RecordEventResponse>) responseObserver);
          break;
        case METHODID_RECORD_OUTCOME:
          serviceImpl.recordOutcome((episodic.v1.IngestServiceOuterClass.RecordOutcomeRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.RecordOutcomeResponse>) responseObserver);
          break;
        case METHODID_GET_THREAD:
          serviceImpl.getThread((episodic.v1.IngestServiceOuterClass.GetThreadRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.GetThreadResponse>) responseObserver);
          break;
        case METHODID_LIST_MESSAGES:
          serviceImpl.listMessages((episodic.v1.IngestServiceOuterClass.ListMessagesRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.ListMessagesResponse>) responseObserver);
          break;
        case METHODID_LIST_THREADS:
          serviceImpl.listThreads((episodic.v1.IngestServiceOuterClass.ListThreadsRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.IngestServiceOuterClass.ListThreadsResponse>) responseObserver);
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

  private static abstract class IngestServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    IngestServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return episodic.v1.IngestServiceOuterClass.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("IngestService");
    }
  }

  private static final class IngestServiceFileDescriptorSupplier
      extends IngestServiceBaseDescriptorSupplier {
    IngestServiceFileDescriptorSupplier() {}
  }

  private static final class IngestServiceMethodDescriptorSupplier
      extends IngestServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final String methodName;

    IngestServiceMethodDescriptorSupplier(String methodName) {
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
      synchronized (IngestServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new IngestServiceFileDescriptorSupplier())
              .addMethod(getCreateThreadMethod())
              .addMethod(getAddMessagesMethod())
              .addMethod(getEndThreadMethod())
              .addMethod(getRecordEventMethod())
              .addMethod(getRecordOutcomeMethod())
              .addMethod(getGetThreadMethod())
              .addMethod(getListMessagesMethod())
              .addMethod(getListThreadsMethod())
              .build();
        }
      }
    }
    return result;
  }
}
