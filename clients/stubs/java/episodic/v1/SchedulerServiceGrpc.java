package episodic.v1;

import static io.grpc.MethodDescriptor.generateFullMethodName;

/**
 * <pre>
 * The Scheduler decides when an episode is created. It owns the idle timers
 * (scheduled_episodes) and the episode lifecycle: the four triggers, windows,
 * orphan reclaim, bounded retries, the backstop and the admin transitions.
 * </pre>
 */
@javax.annotation.Generated(
    value = "by gRPC proto compiler",
    comments = "Source: episodic/v1/scheduler_service.proto")
@io.grpc.stub.annotations.GrpcGenerated
public final class SchedulerServiceGrpc {

  private SchedulerServiceGrpc() {}

  public static final String SERVICE_NAME = "episodic.v1.SchedulerService";

  // Static method descriptors that strictly reflect the proto.
  private static volatile io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RecordActivityRequest,
      episodic.v1.SchedulerServiceOuterClass.RecordActivityResponse> getRecordActivityMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RecordActivity",
      requestType = episodic.v1.SchedulerServiceOuterClass.RecordActivityRequest.class,
      responseType = episodic.v1.SchedulerServiceOuterClass.RecordActivityResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RecordActivityRequest,
      episodic.v1.SchedulerServiceOuterClass.RecordActivityResponse> getRecordActivityMethod() {
    io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RecordActivityRequest, episodic.v1.SchedulerServiceOuterClass.RecordActivityResponse> getRecordActivityMethod;
    if ((getRecordActivityMethod = SchedulerServiceGrpc.getRecordActivityMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getRecordActivityMethod = SchedulerServiceGrpc.getRecordActivityMethod) == null) {
          SchedulerServiceGrpc.getRecordActivityMethod = getRecordActivityMethod =
              io.grpc.MethodDescriptor.<episodic.v1.SchedulerServiceOuterClass.RecordActivityRequest, episodic.v1.SchedulerServiceOuterClass.RecordActivityResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RecordActivity"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SchedulerServiceOuterClass.RecordActivityRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SchedulerServiceOuterClass.RecordActivityResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("RecordActivity"))
              .build();
        }
      }
    }
    return getRecordActivityMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedRequest,
      episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedResponse> getRecordThreadStartedMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RecordThreadStarted",
      requestType = episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedRequest.class,
      responseType = episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedRequest,
      episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedResponse> getRecordThreadStartedMethod() {
    io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedRequest, episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedResponse> getRecordThreadStartedMethod;
    if ((getRecordThreadStartedMethod = SchedulerServiceGrpc.getRecordThreadStartedMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getRecordThreadStartedMethod = SchedulerServiceGrpc.getRecordThreadStartedMethod) == null) {
          SchedulerServiceGrpc.getRecordThreadStartedMethod = getRecordThreadStartedMethod =
              io.grpc.MethodDescriptor.<episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedRequest, episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RecordThreadStarted"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("RecordThreadStarted"))
              .build();
        }
      }
    }
    return getRecordThreadStartedMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RequestEpisodeRequest,
      episodic.v1.SchedulerServiceOuterClass.RequestEpisodeResponse> getRequestEpisodeMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RequestEpisode",
      requestType = episodic.v1.SchedulerServiceOuterClass.RequestEpisodeRequest.class,
      responseType = episodic.v1.SchedulerServiceOuterClass.RequestEpisodeResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RequestEpisodeRequest,
      episodic.v1.SchedulerServiceOuterClass.RequestEpisodeResponse> getRequestEpisodeMethod() {
    io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RequestEpisodeRequest, episodic.v1.SchedulerServiceOuterClass.RequestEpisodeResponse> getRequestEpisodeMethod;
    if ((getRequestEpisodeMethod = SchedulerServiceGrpc.getRequestEpisodeMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getRequestEpisodeMethod = SchedulerServiceGrpc.getRequestEpisodeMethod) == null) {
          SchedulerServiceGrpc.getRequestEpisodeMethod = getRequestEpisodeMethod =
              io.grpc.MethodDescriptor.<episodic.v1.SchedulerServiceOuterClass.RequestEpisodeRequest, episodic.v1.SchedulerServiceOuterClass.RequestEpisodeResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RequestEpisode"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SchedulerServiceOuterClass.RequestEpisodeRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SchedulerServiceOuterClass.RequestEpisodeResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("RequestEpisode"))
              .build();
        }
      }
    }
    return getRequestEpisodeMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RunSweepRequest,
      episodic.v1.SchedulerServiceOuterClass.RunSweepResponse> getRunSweepMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RunSweep",
      requestType = episodic.v1.SchedulerServiceOuterClass.RunSweepRequest.class,
      responseType = episodic.v1.SchedulerServiceOuterClass.RunSweepResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RunSweepRequest,
      episodic.v1.SchedulerServiceOuterClass.RunSweepResponse> getRunSweepMethod() {
    io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RunSweepRequest, episodic.v1.SchedulerServiceOuterClass.RunSweepResponse> getRunSweepMethod;
    if ((getRunSweepMethod = SchedulerServiceGrpc.getRunSweepMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getRunSweepMethod = SchedulerServiceGrpc.getRunSweepMethod) == null) {
          SchedulerServiceGrpc.getRunSweepMethod = getRunSweepMethod =
              io.grpc.MethodDescriptor.<episodic.v1.SchedulerServiceOuterClass.RunSweepRequest, episodic.v1.SchedulerServiceOuterClass.RunSweepResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RunSweep"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SchedulerServiceOuterClass.RunSweepRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SchedulerServiceOuterClass.RunSweepResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("RunSweep"))
              .build();
        }
      }
    }
    return getRunSweepMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeRequest,
      episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeResponse> getDeleteEpisodeMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "DeleteEpisode",
      requestType = episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeRequest.class,
      responseType = episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeRequest,
      episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeResponse> getDeleteEpisodeMethod() {
    io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeRequest, episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeResponse> getDeleteEpisodeMethod;
    if ((getDeleteEpisodeMethod = SchedulerServiceGrpc.getDeleteEpisodeMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getDeleteEpisodeMethod = SchedulerServiceGrpc.getDeleteEpisodeMethod) == null) {
          SchedulerServiceGrpc.getDeleteEpisodeMethod = getDeleteEpisodeMethod =
              io.grpc.MethodDescriptor.<episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeRequest, episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "DeleteEpisode"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("DeleteEpisode"))
              .build();
        }
      }
    }
    return getDeleteEpisodeMethod;
  }

  private static volatile io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RetryEpisodeRequest,
      episodic.v1.SchedulerServiceOuterClass.RetryEpisodeResponse> getRetryEpisodeMethod;

  @io.grpc.stub.annotations.RpcMethod(
      fullMethodName = SERVICE_NAME + '/' + "RetryEpisode",
      requestType = episodic.v1.SchedulerServiceOuterClass.RetryEpisodeRequest.class,
      responseType = episodic.v1.SchedulerServiceOuterClass.RetryEpisodeResponse.class,
      methodType = io.grpc.MethodDescriptor.MethodType.UNARY)
  public static io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RetryEpisodeRequest,
      episodic.v1.SchedulerServiceOuterClass.RetryEpisodeResponse> getRetryEpisodeMethod() {
    io.grpc.MethodDescriptor<episodic.v1.SchedulerServiceOuterClass.RetryEpisodeRequest, episodic.v1.SchedulerServiceOuterClass.RetryEpisodeResponse> getRetryEpisodeMethod;
    if ((getRetryEpisodeMethod = SchedulerServiceGrpc.getRetryEpisodeMethod) == null) {
      synchronized (SchedulerServiceGrpc.class) {
        if ((getRetryEpisodeMethod = SchedulerServiceGrpc.getRetryEpisodeMethod) == null) {
          SchedulerServiceGrpc.getRetryEpisodeMethod = getRetryEpisodeMethod =
              io.grpc.MethodDescriptor.<episodic.v1.SchedulerServiceOuterClass.RetryEpisodeRequest, episodic.v1.SchedulerServiceOuterClass.RetryEpisodeResponse>newBuilder()
              .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
              .setFullMethodName(generateFullMethodName(SERVICE_NAME, "RetryEpisode"))
              .setSampledToLocalTracing(true)
              .setRequestMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SchedulerServiceOuterClass.RetryEpisodeRequest.getDefaultInstance()))
              .setResponseMarshaller(io.grpc.protobuf.ProtoUtils.marshaller(
                  episodic.v1.SchedulerServiceOuterClass.RetryEpisodeResponse.getDefaultInstance()))
              .setSchemaDescriptor(new SchedulerServiceMethodDescriptorSupplier("RetryEpisode"))
              .build();
        }
      }
    }
    return getRetryEpisodeMethod;
  }

  /**
   * Creates a new async stub that supports all call types for the service
   */
  public static SchedulerServiceStub newStub(io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceStub>() {
        @java.lang.Override
        public SchedulerServiceStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SchedulerServiceStub(channel, callOptions);
        }
      };
    return SchedulerServiceStub.newStub(factory, channel);
  }

  /**
   * Creates a new blocking-style stub that supports unary and streaming output calls on the service
   */
  public static SchedulerServiceBlockingStub newBlockingStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceBlockingStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceBlockingStub>() {
        @java.lang.Override
        public SchedulerServiceBlockingStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SchedulerServiceBlockingStub(channel, callOptions);
        }
      };
    return SchedulerServiceBlockingStub.newStub(factory, channel);
  }

  /**
   * Creates a new ListenableFuture-style stub that supports unary calls on the service
   */
  public static SchedulerServiceFutureStub newFutureStub(
      io.grpc.Channel channel) {
    io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceFutureStub> factory =
      new io.grpc.stub.AbstractStub.StubFactory<SchedulerServiceFutureStub>() {
        @java.lang.Override
        public SchedulerServiceFutureStub newStub(io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
          return new SchedulerServiceFutureStub(channel, callOptions);
        }
      };
    return SchedulerServiceFutureStub.newStub(factory, channel);
  }

  /**
   * <pre>
   * The Scheduler decides when an episode is created. It owns the idle timers
   * (scheduled_episodes) and the episode lifecycle: the four triggers, windows,
   * orphan reclaim, bounded retries, the backstop and the admin transitions.
   * </pre>
   */
  public static abstract class SchedulerServiceImplBase implements io.grpc.BindableService {

    /**
     * <pre>
     * Ingest reports new messages on a thread: the idle timer is pushed to now + interval.
     * </pre>
     */
    public void recordActivity(episodic.v1.SchedulerServiceOuterClass.RecordActivityRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RecordActivityResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRecordActivityMethod(), responseObserver);
    }

    /**
     * <pre>
     * Ingest reports a new thread: sibling timers are pulled forward (trigger 2).
     * </pre>
     */
    public void recordThreadStarted(episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRecordThreadStartedMethod(), responseObserver);
    }

    /**
     * <pre>
     * Queues an episode over the thread's uncaptured messages now (trigger 1).
     * </pre>
     */
    public void requestEpisode(episodic.v1.SchedulerServiceOuterClass.RequestEpisodeRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RequestEpisodeResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRequestEpisodeMethod(), responseObserver);
    }

    /**
     * <pre>
     * Runs one pass of the scheduler's periodic work (due timers, catch-up, reclaim,
     * backstop). `as_of` moves the clock for tests and replays.
     * </pre>
     */
    public void runSweep(episodic.v1.SchedulerServiceOuterClass.RunSweepRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RunSweepResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRunSweepMethod(), responseObserver);
    }

    /**
     * <pre>
     * Soft-deletes an episode: its status becomes archived. Returns the episode (AIP-164).
     * An event (kind EPISODE_KIND_EVENT, by the id Recall and ListEpisodes list it under)
     * has no status to archive: it is erased outright, and returned as it was, marked
     * archived; deleting it again is NOT_FOUND.
     * </pre>
     */
    public void deleteEpisode(episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getDeleteEpisodeMethod(), responseObserver);
    }

    /**
     * <pre>
     * Puts a failed episode back to pending. FAILED_PRECONDITION unless it is failed (an
     * event never is).
     * </pre>
     */
    public void retryEpisode(episodic.v1.SchedulerServiceOuterClass.RetryEpisodeRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RetryEpisodeResponse> responseObserver) {
      io.grpc.stub.ServerCalls.asyncUnimplementedUnaryCall(getRetryEpisodeMethod(), responseObserver);
    }

    @java.lang.Override public final io.grpc.ServerServiceDefinition bindService() {
      return io.grpc.ServerServiceDefinition.builder(getServiceDescriptor())
          .addMethod(
            getRecordActivityMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.SchedulerServiceOuterClass.RecordActivityRequest,
                episodic.v1.SchedulerServiceOuterClass.RecordActivityResponse>(
                  this, METHODID_RECORD_ACTIVITY)))
          .addMethod(
            getRecordThreadStartedMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedRequest,
                episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedResponse>(
                  this, METHODID_RECORD_THREAD_STARTED)))
          .addMethod(
            getRequestEpisodeMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.SchedulerServiceOuterClass.RequestEpisodeRequest,
                episodic.v1.SchedulerServiceOuterClass.RequestEpisodeResponse>(
                  this, METHODID_REQUEST_EPISODE)))
          .addMethod(
            getRunSweepMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.SchedulerServiceOuterClass.RunSweepRequest,
                episodic.v1.SchedulerServiceOuterClass.RunSweepResponse>(
                  this, METHODID_RUN_SWEEP)))
          .addMethod(
            getDeleteEpisodeMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeRequest,
                episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeResponse>(
                  this, METHODID_DELETE_EPISODE)))
          .addMethod(
            getRetryEpisodeMethod(),
            io.grpc.stub.ServerCalls.asyncUnaryCall(
              new MethodHandlers<
                episodic.v1.SchedulerServiceOuterClass.RetryEpisodeRequest,
                episodic.v1.SchedulerServiceOuterClass.RetryEpisodeResponse>(
                  this, METHODID_RETRY_EPISODE)))
          .build();
    }
  }

  /**
   * <pre>
   * The Scheduler decides when an episode is created. It owns the idle timers
   * (scheduled_episodes) and the episode lifecycle: the four triggers, windows,
   * orphan reclaim, bounded retries, the backstop and the admin transitions.
   * </pre>
   */
  public static final class SchedulerServiceStub extends io.grpc.stub.AbstractAsyncStub<SchedulerServiceStub> {
    private SchedulerServiceStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SchedulerServiceStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SchedulerServiceStub(channel, callOptions);
    }

    /**
     * <pre>
     * Ingest reports new messages on a thread: the idle timer is pushed to now + interval.
     * </pre>
     */
    public void recordActivity(episodic.v1.SchedulerServiceOuterClass.RecordActivityRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RecordActivityResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRecordActivityMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Ingest reports a new thread: sibling timers are pulled forward (trigger 2).
     * </pre>
     */
    public void recordThreadStarted(episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRecordThreadStartedMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Queues an episode over the thread's uncaptured messages now (trigger 1).
     * </pre>
     */
    public void requestEpisode(episodic.v1.SchedulerServiceOuterClass.RequestEpisodeRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RequestEpisodeResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRequestEpisodeMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Runs one pass of the scheduler's periodic work (due timers, catch-up, reclaim,
     * backstop). `as_of` moves the clock for tests and replays.
     * </pre>
     */
    public void runSweep(episodic.v1.SchedulerServiceOuterClass.RunSweepRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RunSweepResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRunSweepMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Soft-deletes an episode: its status becomes archived. Returns the episode (AIP-164).
     * An event (kind EPISODE_KIND_EVENT, by the id Recall and ListEpisodes list it under)
     * has no status to archive: it is erased outright, and returned as it was, marked
     * archived; deleting it again is NOT_FOUND.
     * </pre>
     */
    public void deleteEpisode(episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getDeleteEpisodeMethod(), getCallOptions()), request, responseObserver);
    }

    /**
     * <pre>
     * Puts a failed episode back to pending. FAILED_PRECONDITION unless it is failed (an
     * event never is).
     * </pre>
     */
    public void retryEpisode(episodic.v1.SchedulerServiceOuterClass.RetryEpisodeRequest request,
        io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RetryEpisodeResponse> responseObserver) {
      io.grpc.stub.ClientCalls.asyncUnaryCall(
          getChannel().newCall(getRetryEpisodeMethod(), getCallOptions()), request, responseObserver);
    }
  }

  /**
   * <pre>
   * The Scheduler decides when an episode is created. It owns the idle timers
   * (scheduled_episodes) and the episode lifecycle: the four triggers, windows,
   * orphan reclaim, bounded retries, the backstop and the admin transitions.
   * </pre>
   */
  public static final class SchedulerServiceBlockingStub extends io.grpc.stub.AbstractBlockingStub<SchedulerServiceBlockingStub> {
    private SchedulerServiceBlockingStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SchedulerServiceBlockingStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SchedulerServiceBlockingStub(channel, callOptions);
    }

    /**
     * <pre>
     * Ingest reports new messages on a thread: the idle timer is pushed to now + interval.
     * </pre>
     */
    public episodic.v1.SchedulerServiceOuterClass.RecordActivityResponse recordActivity(episodic.v1.SchedulerServiceOuterClass.RecordActivityRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRecordActivityMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Ingest reports a new thread: sibling timers are pulled forward (trigger 2).
     * </pre>
     */
    public episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedResponse recordThreadStarted(episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRecordThreadStartedMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Queues an episode over the thread's uncaptured messages now (trigger 1).
     * </pre>
     */
    public episodic.v1.SchedulerServiceOuterClass.RequestEpisodeResponse requestEpisode(episodic.v1.SchedulerServiceOuterClass.RequestEpisodeRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRequestEpisodeMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Runs one pass of the scheduler's periodic work (due timers, catch-up, reclaim,
     * backstop). `as_of` moves the clock for tests and replays.
     * </pre>
     */
    public episodic.v1.SchedulerServiceOuterClass.RunSweepResponse runSweep(episodic.v1.SchedulerServiceOuterClass.RunSweepRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRunSweepMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Soft-deletes an episode: its status becomes archived. Returns the episode (AIP-164).
     * An event (kind EPISODE_KIND_EVENT, by the id Recall and ListEpisodes list it under)
     * has no status to archive: it is erased outright, and returned as it was, marked
     * archived; deleting it again is NOT_FOUND.
     * </pre>
     */
    public episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeResponse deleteEpisode(episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getDeleteEpisodeMethod(), getCallOptions(), request);
    }

    /**
     * <pre>
     * Puts a failed episode back to pending. FAILED_PRECONDITION unless it is failed (an
     * event never is).
     * </pre>
     */
    public episodic.v1.SchedulerServiceOuterClass.RetryEpisodeResponse retryEpisode(episodic.v1.SchedulerServiceOuterClass.RetryEpisodeRequest request) {
      return io.grpc.stub.ClientCalls.blockingUnaryCall(
          getChannel(), getRetryEpisodeMethod(), getCallOptions(), request);
    }
  }

  /**
   * <pre>
   * The Scheduler decides when an episode is created. It owns the idle timers
   * (scheduled_episodes) and the episode lifecycle: the four triggers, windows,
   * orphan reclaim, bounded retries, the backstop and the admin transitions.
   * </pre>
   */
  public static final class SchedulerServiceFutureStub extends io.grpc.stub.AbstractFutureStub<SchedulerServiceFutureStub> {
    private SchedulerServiceFutureStub(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      super(channel, callOptions);
    }

    @java.lang.Override
    protected SchedulerServiceFutureStub build(
        io.grpc.Channel channel, io.grpc.CallOptions callOptions) {
      return new SchedulerServiceFutureStub(channel, callOptions);
    }

    /**
     * <pre>
     * Ingest reports new messages on a thread: the idle timer is pushed to now + interval.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.SchedulerServiceOuterClass.RecordActivityResponse> recordActivity(
        episodic.v1.SchedulerServiceOuterClass.RecordActivityRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRecordActivityMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Ingest reports a new thread: sibling timers are pulled forward (trigger 2).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedResponse> recordThreadStarted(
        episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRecordThreadStartedMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Queues an episode over the thread's uncaptured messages now (trigger 1).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.SchedulerServiceOuterClass.RequestEpisodeResponse> requestEpisode(
        episodic.v1.SchedulerServiceOuterClass.RequestEpisodeRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRequestEpisodeMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Runs one pass of the scheduler's periodic work (due timers, catch-up, reclaim,
     * backstop). `as_of` moves the clock for tests and replays.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.SchedulerServiceOuterClass.RunSweepResponse> runSweep(
        episodic.v1.SchedulerServiceOuterClass.RunSweepRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRunSweepMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Soft-deletes an episode: its status becomes archived. Returns the episode (AIP-164).
     * An event (kind EPISODE_KIND_EVENT, by the id Recall and ListEpisodes list it under)
     * has no status to archive: it is erased outright, and returned as it was, marked
     * archived; deleting it again is NOT_FOUND.
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeResponse> deleteEpisode(
        episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getDeleteEpisodeMethod(), getCallOptions()), request);
    }

    /**
     * <pre>
     * Puts a failed episode back to pending. FAILED_PRECONDITION unless it is failed (an
     * event never is).
     * </pre>
     */
    public com.google.common.util.concurrent.ListenableFuture<episodic.v1.SchedulerServiceOuterClass.RetryEpisodeResponse> retryEpisode(
        episodic.v1.SchedulerServiceOuterClass.RetryEpisodeRequest request) {
      return io.grpc.stub.ClientCalls.futureUnaryCall(
          getChannel().newCall(getRetryEpisodeMethod(), getCallOptions()), request);
    }
  }

  private static final int METHODID_RECORD_ACTIVITY = 0;
  private static final int METHODID_RECORD_THREAD_STARTED = 1;
  private static final int METHODID_REQUEST_EPISODE = 2;
  private static final int METHODID_RUN_SWEEP = 3;
  private static final int METHODID_DELETE_EPISODE = 4;
  private static final int METHODID_RETRY_EPISODE = 5;

  private static final class MethodHandlers<Req, Resp> implements
      io.grpc.stub.ServerCalls.UnaryMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ServerStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.ClientStreamingMethod<Req, Resp>,
      io.grpc.stub.ServerCalls.BidiStreamingMethod<Req, Resp> {
    private final SchedulerServiceImplBase serviceImpl;
    private final int methodId;

    MethodHandlers(SchedulerServiceImplBase serviceImpl, int methodId) {
      this.serviceImpl = serviceImpl;
      this.methodId = methodId;
    }

    @java.lang.Override
    @java.lang.SuppressWarnings("unchecked")
    public void invoke(Req request, io.grpc.stub.StreamObserver<Resp> responseObserver) {
      switch (methodId) {
        case METHODID_RECORD_ACTIVITY:
          serviceImpl.recordActivity((episodic.v1.SchedulerServiceOuterClass.RecordActivityRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RecordActivityResponse>) responseObserver);
          break;
        case METHODID_RECORD_THREAD_STARTED:
          serviceImpl.recordThreadStarted((episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RecordThreadStartedResponse>) responseObserver);
          break;
        case METHODID_REQUEST_EPISODE:
          serviceImpl.requestEpisode((episodic.v1.SchedulerServiceOuterClass.RequestEpisodeRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RequestEpisodeResponse>) responseObserver);
          break;
        case METHODID_RUN_SWEEP:
          serviceImpl.runSweep((episodic.v1.SchedulerServiceOuterClass.RunSweepRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RunSweepResponse>) responseObserver);
          break;
        case METHODID_DELETE_EPISODE:
          serviceImpl.deleteEpisode((episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.DeleteEpisodeResponse>) responseObserver);
          break;
        case METHODID_RETRY_EPISODE:
          serviceImpl.retryEpisode((episodic.v1.SchedulerServiceOuterClass.RetryEpisodeRequest) request,
              (io.grpc.stub.StreamObserver<episodic.v1.SchedulerServiceOuterClass.RetryEpisodeResponse>) responseObserver);
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

  private static abstract class SchedulerServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoFileDescriptorSupplier, io.grpc.protobuf.ProtoServiceDescriptorSupplier {
    SchedulerServiceBaseDescriptorSupplier() {}

    @java.lang.Override
    public com.google.protobuf.Descriptors.FileDescriptor getFileDescriptor() {
      return episodic.v1.SchedulerServiceOuterClass.getDescriptor();
    }

    @java.lang.Override
    public com.google.protobuf.Descriptors.ServiceDescriptor getServiceDescriptor() {
      return getFileDescriptor().findServiceByName("SchedulerService");
    }
  }

  private static final class SchedulerServiceFileDescriptorSupplier
      extends SchedulerServiceBaseDescriptorSupplier {
    SchedulerServiceFileDescriptorSupplier() {}
  }

  private static final class SchedulerServiceMethodDescriptorSupplier
      extends SchedulerServiceBaseDescriptorSupplier
      implements io.grpc.protobuf.ProtoMethodDescriptorSupplier {
    private final String methodName;

    SchedulerServiceMethodDescriptorSupplier(String methodName) {
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
      synchronized (SchedulerServiceGrpc.class) {
        result = serviceDescriptor;
        if (result == null) {
          serviceDescriptor = result = io.grpc.ServiceDescriptor.newBuilder(SERVICE_NAME)
              .setSchemaDescriptor(new SchedulerServiceFileDescriptorSupplier())
              .addMethod(getRecordActivityMethod())
              .addMethod(getRecordThreadStartedMethod())
              .addMethod(getRequestEpisodeMethod())
              .addMethod(getRunSweepMethod())
              .addMethod(getDeleteEpisodeMethod())
              .addMethod(getRetryEpisodeMethod())
              .build();
        }
      }
    }
    return result;
  }
}
