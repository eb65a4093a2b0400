package episodic.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * The Summariser turns pending episodes into completed ones (summary, key learnings,
 * entities, embedding) and then drives their semantic status. It works off the database;
 * these RPCs let operators and tests drive and inspect it.
 * </pre>
 */
@javax.annotation.Generated(
    value = "by gRPC proto compiler",
    comments = "Source: episodic/v1/summariser_service.proto")
@io.grpc.stub.annotations.GrpcGenerated
public final class SummariserServiceGrpc {

  private SummariserServiceGrpc() {}

  public static final String SERVICE_NAME = "episodic.v1.SummariserService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<episodic.v1.SummariserServiceOuterClass.ProcessPendingRequest,
      episodic.v1.SummariserServiceOuterClass.ProcessPendingResponse> getProcessPendingMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "ProcessPending",
      requestType = episodic.v1.SummariserServiceOuterClass.ProcessPendingRequest.class,
      responseType = episodic.v1.SummariserServiceOuterClass.ProcessPendingResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.SummariserServiceOuterClass.ProcessPendingRequest,
      episodic.v1.SummariserServiceOuterClass.ProcessPendingResponse> getProcessPendingMethod() {
    io.grpc.MethodDescriptor<episodic.v1.SummariserServiceOuterClass.ProcessPendingRequest, episodic.v1.SummariserServiceOuterClass.ProcessPendingResponse> getProcessPendingMethod;
    if ((getProcessPendingMethod = SummariserServiceGrpc.getProcessPendingMethod) == null) {
      synchronized (SummariserServiceGrpc.class) {
        if ((getProcessPendingMethod = SummariserServiceGrpc.getProcessPendingMethod) == null) {
          SummariserServiceGrpc.getProcessPendingMethod = getProcessPendingMethod =
              io.grpc.MethodDescriptor.<episodic.v1.SummariserServiceOuterClass.ProcessPendingRequest, episodic.v1.SummariserServiceOuterClass.ProcessPendingResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "ProcessPending"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SummariserServiceOuterClass.ProcessPendingRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SummariserServiceOuterClass.ProcessPendingResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SummariserServiceMethodDescriptorSupplier("ProcessPending"))
              .build();
        }
      }
    }
    return getProcessPendingMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.SummariserServiceOuterClass.CheckProvidersRequest,
      episodic.v1.SummariserServiceOuterClass.CheckProvidersResponse> getCheckProvidersMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "CheckProviders",
      requestType = episodic.v1.SummariserServiceOuterClass.CheckProvidersRequest.class,
      responseType = episodic.v1.SummariserServiceOuterClass.CheckProvidersResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.SummariserServiceOuterClass.CheckProvidersRequest,
      episodic.v1.SummariserServiceOuterClass.CheckProvidersResponse> getCheckProvidersMethod() {
    io.grpc.MethodDescriptor<episodic.v1.SummariserServiceOuterClass.CheckProvidersRequest, episodic.v1.SummariserServiceOuterClass.CheckProvidersResponse> getCheckProvidersMethod;
    if ((getCheckProvidersMethod = SummariserServiceGrpc.getCheckProvidersMethod) == null) {
      synchronized (SummariserServiceGrpc.class) {
        if ((getCheckProvidersMethod = SummariserServiceGrpc.getCheckProvidersMethod) == null) {
          SummariserServiceGrpc.getCheckProvidersMethod = getCheckProvidersMethod =
              io.grpc.MethodDescriptor.<episodic.v1.SummariserServiceOuterClass.CheckProvidersRequest, episodic.v1.SummariserServiceOuterClass.CheckProvidersResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "CheckProviders"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SummariserServiceOuterClass.CheckProvidersRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SummariserServiceOuterClass.CheckProvidersResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SummariserServiceMethodDescriptorSupplier("CheckProviders"))
              .build();
        }
      }
    }
    return getCheckProvidersMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.SummariserServiceOuterClass.GetPipelineStatusRequest,
      episodic.v1.SummariserServiceOuterClass.GetPipelineStatusResponse> getGetPipelineStatusMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "GetPipelineStatus",
      requestType = episodic.v1.SummariserServiceOuterClass.GetPipelineStatusRequest.class,
      responseType = episodic.v1.SummariserServiceOuterClass.GetPipelineStatusResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.SummariserServiceOuterClass.GetPipelineStatusRequest,
      episodic.v1.SummariserServiceOuterClass.GetPipelineStatusResponse> getGetPipelineStatusMethod() {
    io.grpc.MethodDescriptor<episodic.v1.SummariserServiceOuterClass.GetPipelineStatusRequest, episodic.v1.SummariserServiceOuterClass.GetPipelineStatusResponse> getGetPipelineStatusMethod;
    if ((getGetPipelineStatusMethod = SummariserServiceGrpc.getGetPipelineStatusMethod) == null) {
      synchronized (SummariserServiceGrpc.class) {
        if ((getGetPipelineStatusMethod = SummariserServiceGrpc.getGetPipelineStatusMethod) == null) {
          SummariserServiceGrpc.getGetPipelineStatusMethod = getGetPipelineStatusMethod =
              io.grpc.MethodDescriptor.<episodic.v1.SummariserServiceOuterClass.GetPipelineStatusRequest, episodic.v1.SummariserServiceOuterClass.GetPipelineStatusResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "GetPipelineStatus"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SummariserServiceOuterClass.GetPipelineStatusRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SummariserServiceOuterClass.GetPipelineStatusResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SummariserServiceMethodDescriptorSupplier("GetPipelineStatus"))
              .build();
        }
      }
    }
    return getGetPipelineStatusMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static SummariserServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SummariserServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SummariserServiceStub>() {
        @java.lang.Override
        public SummariserServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SummariserServiceStub(channel, callOptions);
        }
      };
    return SummariserServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static SummariserServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SummariserServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SummariserServiceBlockingStub>() {
        @java.lang.Override
        public SummariserServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SummariserServiceBlockingStub(channel, callOptions);
        }
      };
    return SummariserServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static SummariserServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SummariserServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SummariserServiceFutureStub>() {
        @java.lang.Override
        public SummariserServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SummariserServiceFutureStub(channel, callOptions);
        }
      };
    return SummariserServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * The Summariser turns pending episodes into completed ones (summary, key learnings,
   * entities, embedding) and then drives their semantic status. It works off the database;
   * these RPCs let operators and tests drive and inspect it.
   * </pre>
   */
  public static abstract class SummariserServiceImplBase implements io.grpc.BindableService {

    /**
     * <pre>
     * Claims and processes up to `max_episodes` pending episodes now, then returns.
     * </pre>
     */
    public void processPending(episodic.v1.SummariserServiceOuterClass.ProcessPendingRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SummariserServiceOuterClass.ProcessPendingResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getProcessPendingMethod(), responseObserver);
    }

    /**
     * <pre>
     * Checks whether the configured LLM and embedding providers answer.
     * </pre>
     */
    public void checkProviders(episodic.v1.SummariserServiceOuterClass.CheckProvidersRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SummariserServiceOuterClass.CheckProvidersResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getCheckProvidersMethod(), responseObserver);
    }

    /**
     * <pre>
     * Shows whether the pipeline moves: counts per status, backlog ages, overdue timers,
     * recent errors and provider health. A healthy-looking but stuck pipeline shows here.
     * </pre>
     */
    public void getPipelineStatus(episodic.v1.SummariserServiceOuterClass.GetPipelineStatusRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SummariserServiceOuterClass.GetPipelineStatusResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getGetPipelineStatusMethod(), responseObserver);
    }

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
          .addMethod(
            getProcessPendingMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.SummariserServiceOuterClass.ProcessPendingRequest,
                episodic.v1.SummariserServiceOuterClass.ProcessPendingResponse>(
                  this, METHODID_PROCESS_PENDING)))
          .addMethod(
            getCheckProvidersMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.SummariserServiceOuterClass.CheckProvidersRequest,
                episodic.v1.SummariserServiceOuterClass.CheckProvidersResponse>(
                  this, METHODID_CHECK_PROVIDERS)))
          .addMethod(
            getGetPipelineStatusMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.SummariserServiceOuterClass.GetPipelineStatusRequest,
                episodic.v1.SummariserServiceOuterClass.GetPipelineStatusResponse>(
                  this, METHODID_GET_PIPELINE_STATUS)))
          .build();
    }
  }

  /**
   * <pre>
   * The Summariser turns pending episodes into completed ones (summary, key learnings,
   * entities, embedding) and then drives their semantic status. It works off the database;
   * these RPCs let operators and tests drive and inspect it.
   * </pre>
   */
  public static final class SummariserServiceStub extends io.grpc.stub.AbstractAsyncStub<SummariserServiceStub> {
    private SummariserServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SummariserServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SummariserServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Claims and processes up to `max_episodes` pending episodes now, then returns.
     * </pre>
     */
    public void processPending(episodic.v1.SummariserServiceOuterClass.ProcessPendingRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SummariserServiceOuterClass.ProcessPendingResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getProcessPendingMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Checks whether the configured LLM and embedding providers answer.
     * </pre>
     */
    public void checkProviders(episodic.v1.SummariserServiceOuterClass.CheckProvidersRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SummariserServiceOuterClass.CheckProvidersResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getCheckProvidersMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Shows whether the pipeline moves: counts per status, backlog ages, overdue timers,
     * recent errors and provider health. A healthy-looking but stuck pipeline shows here.
     * </pre>
     */
    public void getPipelineStatus(episodic.v1.SummariserServiceOuterClass.GetPipelineStatusRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SummariserServiceOuterClass.GetPipelineStatusResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getGetPipelineStatusMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * <pre>
   * The Summariser turns pending episodes into completed ones (summary, key learnings,
   * entities, embedding) and then drives their semantic status. It works off the database;
   * these RPCs let operators and tests drive and inspect it.
   * </pre>
   */
  public static final class SummariserServiceBlockingStub extends io.grpc.stub.AbstractBlockingStub<SummariserServiceBlockingStub> {
    private SummariserServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SummariserServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SummariserServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Claims and processes up to `max_episodes` pending episodes now, then returns.
     * </pre>
     */
    public episodic.v1.SummariserServiceOuterClass.ProcessPendingResponse processPending(episodic.v1.SummariserServiceOuterClass.ProcessPendingRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getProcessPendingMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Checks whether the configured LLM and embedding providers answer.
     * </pre>
     */
    public episodic.v1.SummariserServiceOuterClass.CheckProvidersResponse checkProviders(episodic.v1.SummariserServiceOuterClass.CheckProvidersRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getCheckProvidersMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Shows whether the pipeline moves: counts per status, backlog ages, overdue timers,
     * recent errors and provider health. A healthy-looking but stuck pipeline shows here.
     * </pre>
     */
    public episodic.v1.SummariserServiceOuterClass.GetPipelineStatusResponse getPipelineStatus(episodic.v1.SummariserServiceOuterClass.GetPipelineStatusRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getGetPipelineStatusMethod(), getCallOptions(), request);
    }
  }

  /**
   * <pre>
   * The Summariser turns pending episodes into completed ones (summary, key learnings,
   * entities, embedding) and then drives their semantic status. It works off the database;
   * these RPCs let operators and tests drive and inspect it.
   * </pre>
   */
  public static final class SummariserServiceFutureStub extends io.grpc.stub.AbstractFutureStub<SummariserServiceFutureStub> {
    private SummariserServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SummariserServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SummariserServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Claims and processes up to `max_episodes` pending episodes now, then returns.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.SummariserServiceOuterClass.ProcessPendingResponse> processPending(
        episodic.v1.SummariserServiceOuterClass.ProcessPendingRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getProcessPendingMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Checks whether the configured LLM and embedding providers answer.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.SummariserServiceOuterClass.CheckProvidersResponse> checkProviders(
        episodic.v1.SummariserServiceOuterClass.CheckProvidersRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getCheckProvidersMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Shows whether the pipeline moves: counts per status, backlog ages, overdue timers,
     * recent errors and provider health. A healthy-looking but stuck pipeline shows here.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.SummariserServiceOuterClass.GetPipelineStatusResponse> getPipelineStatus(
        episodic.v1.SummariserServiceOuterClass.GetPipelineStatusRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getGetPipelineStatusMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_PROCESS_PENDING = 0;
  private static final int METHODID_CHECK_PROVIDERS = 1;
  private static final int METHODID_GET_PIPELINE_STATUS = 2;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final SummariserServiceImplBase serviceImpl;
    private final int methodId;

    MethodHandlers(SummariserServiceImplBase serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_PROCESS_PENDING:
          serviceImpl.processPending((episodic.v1.SummariserServiceOuterClass.ProcessPendingRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.SummariserServiceOuterClass.ProcessPendingResponse>) responseObserver);
          break;
        case METHODID_CHECK_PROVIDERS:
          serviceImpl.checkProviders((episodic.v1.SummariserServiceOuterClass.CheckProvidersRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.SummariserServiceOuterClass.CheckProvidersResponse>) responseObserver);
          break;
        case METHODID_GET_PIPELINE_STATUS:
          serviceImpl.getPipelineStatus((episodic.v1.SummariserServiceOuterClass.GetPipelineStatusRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.SummariserServiceOuterClass.GetPipelineStatusResponse>) responseObserver);
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

  private static abstract class SummariserServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    SummariserServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return episodic.v1.SummariserServiceOuterClass.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("SummariserService");
    }
  }

  private static final class SummariserServiceFileDescriptorSupplier
      extends SummariserServiceBaseDescriptorSupplier {
    SummariserServiceFileDescriptorSupplier() {}
  }

  private static final class SummariserServiceMethodDescriptorSupplier
      extends SummariserServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final String methodName;

    SummariserServiceMethodDescriptorSupplier(String methodName) {
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
      synchronized (SummariserServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new SummariserServiceFileDescriptorSupplier())
              .addMethod(getProcessPendingMethod())
              .addMethod(getCheckProvidersMethod())
              .addMethod(getGetPipelineStatusMethod())
              .build();
        }
      }
    }
    return result;
  }
}
