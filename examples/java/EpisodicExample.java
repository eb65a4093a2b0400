// A Java backend calling episodic through the generated stubs (package episodic.v1): create a
// thread, write messages, end it, wait for its episode, recall it, and read the typed details
// of an error. Every call carries a deadline and the API key.
//
// Configuration, as the Python, TypeScript and Go clients read it:
//
//   EPISODIC_INGEST_ADDRESS  host:port of the IngestService (default 127.0.0.1:50051)
//   EPISODIC_RECALL_ADDRESS  host:port of the RecallService (default 127.0.0.1:50054)
//   EPISODIC_API_KEY         sent as `authorization: Bearer <key>` (optional on a loopback
//                            suite in development mode; required under EPISODIC_AUTH=required)
//   EPISODIC_DATASET         the dataset to write to (default java_example)
//
// It prints one line per step and exits 0 only when every step did what is expected.

import com.google.protobuf.Any;
import com.google.protobuf.InvalidProtocolBufferException;
import com.google.rpc.BadRequest;
import com.google.rpc.ErrorInfo;
import com.google.rpc.RetryInfo;
import episodic.v1.EpisodeOuterClass;
import episodic.v1.EpisodeOuterClass.Episode;
import episodic.v1.EpisodeOuterClass.EpisodeKind;
import episodic.v1.EpisodeOuterClass.EpisodeStatus;
import episodic.v1.EpisodeOuterClass.Role;
import episodic.v1.EpisodeOuterClass.ScoredEpisode;
import episodic.v1.IngestServiceGrpc;
import episodic.v1.IngestServiceOuterClass.AddMessagesRequest;
import episodic.v1.IngestServiceOuterClass.AddMessagesResponse;
import episodic.v1.IngestServiceOuterClass.CreateThreadRequest;
import episodic.v1.IngestServiceOuterClass.EndThreadRequest;
import episodic.v1.IngestServiceOuterClass.EndThreadResponse;
import episodic.v1.IngestServiceOuterClass.MessageReceipt;
import episodic.v1.IngestServiceOuterClass.NewMessage;
import episodic.v1.RecallServiceGrpc;
import episodic.v1.RecallServiceOuterClass.GetEpisodeRequest;
import episodic.v1.RecallServiceOuterClass.ListEpisodesRequest;
import episodic.v1.RecallServiceOuterClass.RecallInclude;
import episodic.v1.RecallServiceOuterClass.RecallRequest;
import episodic.v1.RecallServiceOuterClass.RecalledEpisodes;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.MetadataUtils;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

public final class EpisodicExample {
  private static final long CALL_TIMEOUT_SECONDS = 10; // the deadline of each call
  private static final Duration EPISODE_TIMEOUT = Duration.ofSeconds(120);
  private static final long POLL_INTERVAL_MILLIS = 200;

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isEmpty() ? fallback : value;
  }

  /** Plaintext, as a suite on loopback serves (with TLS: useTransportSecurity()); the API key
   * goes with every call of the channel. */
  private static ManagedChannel dial(String address, String key) {
    ManagedChannelBuilder<?> builder = ManagedChannelBuilder.forTarget(address).usePlaintext();
    if (!key.isEmpty()) {
      Metadata headers = new Metadata();
      headers.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + key);
      builder.intercept(MetadataUtils.newAttachHeadersInterceptor(headers));
    }
    return builder.build();
  }

  private static RuntimeException fail(String message) {
    System.out.println("FAIL " + message);
    System.out.flush();
    System.exit(1);
    return new IllegalStateException(message);
  }

  /** A gRPC error the way a backend should read it: the code, the message, and the typed
   * details the suite attaches (google.rpc.ErrorInfo always; RetryInfo when it asks to wait;
   * BadRequest from servers that send one). */
  static String describe(StatusRuntimeException err) {
    Status status = err.getStatus();
    List<String> parts = new ArrayList<>();
    parts.add("code=" + status.getCode() + " message=\"" + status.getDescription() + "\"");
    if (status.getCause() != null) {
      // What the transport saw (a refused connection, an unresolvable host): grpc-java's
      // description alone says only "io exception".
      parts.add("cause=\"" + status.getCause() + "\"");
    }
    com.google.rpc.Status rich = StatusProto.fromThrowable(err);
    if (rich == null) {
      return String.join(" ", parts);
    }
    for (Any detail : rich.getDetailsList()) {
      try {
        if (detail.is(ErrorInfo.class)) {
          ErrorInfo info = detail.unpack(ErrorInfo.class);
          List<String> meta = new ArrayList<>();
          new TreeMap<>(info.getMetadataMap()).forEach((k, v) -> meta.add(k + "=" + v));
          parts.add("ErrorInfo{reason=" + info.getReason() + " domain=" + info.getDomain()
              + " metadata={" + String.join(",", meta) + "}}");
        } else if (detail.is(BadRequest.class)) {
          for (BadRequest.FieldViolation v : detail.unpack(BadRequest.class).getFieldViolationsList()) {
            parts.add("BadRequest{field=" + v.getField() + " description=\"" + v.getDescription() + "\"}");
          }
        } else if (detail.is(RetryInfo.class)) {
          com.google.protobuf.Duration delay = detail.unpack(RetryInfo.class).getRetryDelay();
          parts.add("RetryInfo{retry_delay=" + delay.getSeconds() + "s+" + delay.getNanos() + "ns}");
        } else {
          parts.add("detail " + detail.getTypeUrl());
        }
      } catch (InvalidProtocolBufferException e) {
        parts.add("undecodable detail " + detail.getTypeUrl());
      }
    }
    return String.join(" ", parts);
  }

  static ErrorInfo errorInfo(StatusRuntimeException err) {
    com.google.rpc.Status rich = StatusProto.fromThrowable(err);
    if (rich != null) {
      for (Any detail : rich.getDetailsList()) {
        if (detail.is(ErrorInfo.class)) {
          try {
            return detail.unpack(ErrorInfo.class);
          } catch (InvalidProtocolBufferException e) {
            return null;
          }
        }
      }
    }
    return null;
  }

  /** Polls, with a deadline, until the episode EndThread queued is COMPLETED. EndThread names
   * it when the Scheduler answered in time; else it is the thread's episode that ends at the
   * last message, once the Scheduler has queued it. */
  static Episode waitForEpisode(RecallServiceGrpc.RecallServiceBlockingStub recall, String dataset,
      String threadId, String episodeId, long endSequence) throws InterruptedException {
    long deadline = System.nanoTime() + EPISODE_TIMEOUT.toNanos();
    int polls = 0;
    while (true) {
      polls++;
      Episode episode = null;
      RecallServiceGrpc.RecallServiceBlockingStub call =
          recall.withDeadlineAfter(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS);
      try {
        if (!episodeId.isEmpty()) {
          episode = call.getEpisode(GetEpisodeRequest.newBuilder().setEpisodeId(episodeId).build())
              .getEpisode();
        } else {
          for (Episode e : call.listEpisodes(ListEpisodesRequest.newBuilder()
              .setDataset(dataset).setThreadId(threadId).build()).getEpisodesList()) {
            if (e.getEndSequence() == endSequence && e.getKind() != EpisodeKind.EPISODE_KIND_EVENT) {
              episode = e;
            }
          }
        }
      } catch (StatusRuntimeException err) {
        // UNAVAILABLE (the service restarting, a connection reset) is worth another poll
        // until the deadline; any other code is an answer.
        if (err.getStatus().getCode() != Status.Code.UNAVAILABLE
            || System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(POLL_INTERVAL_MILLIS) > deadline) {
          throw fail("waiting for the episode: " + describe(err));
        }
        System.out.println("poll: " + describe(err) + "; polling again");
        java.lang.Thread.sleep(POLL_INTERVAL_MILLIS);
        continue;
      }
      if (episode != null && episode.getStatus() == EpisodeStatus.EPISODE_STATUS_COMPLETED) {
        System.out.printf("episode %s %s after %d poll(s)%n", episode.getEpisodeId(),
            episode.getStatus(), polls);
        return episode;
      }
      if (episode != null && episode.getStatus() == EpisodeStatus.EPISODE_STATUS_FAILED) {
        throw fail("episode " + episode.getEpisodeId() + " FAILED: " + episode.getError());
      }
      if (System.nanoTime() > deadline) {
        throw fail("no COMPLETED episode for thread " + threadId + " within " + EPISODE_TIMEOUT);
      }
      java.lang.Thread.sleep(POLL_INTERVAL_MILLIS);
    }
  }

  public static void main(String[] args) throws InterruptedException {
    String key = env("EPISODIC_API_KEY", "");
    String dataset = env("EPISODIC_DATASET", "java_example");
    String recallAddress = env("EPISODIC_RECALL_ADDRESS", "127.0.0.1:50054");
    ManagedChannel ingestChannel = dial(env("EPISODIC_INGEST_ADDRESS", "127.0.0.1:50051"), key);
    ManagedChannel recallChannel = dial(recallAddress, key);
    IngestServiceGrpc.IngestServiceBlockingStub ingest = IngestServiceGrpc.newBlockingStub(ingestChannel);
    RecallServiceGrpc.RecallServiceBlockingStub recall = RecallServiceGrpc.newBlockingStub(recallChannel);
    try {
      run(ingest, recall, dataset, key, recallAddress);
    } catch (StatusRuntimeException err) {
      throw fail(describe(err));
    } finally {
      ingestChannel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
      recallChannel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
    System.out.println("OK");
  }

  static void run(IngestServiceGrpc.IngestServiceBlockingStub ingest,
      RecallServiceGrpc.RecallServiceBlockingStub recall, String dataset, String key,
      String recallAddress) throws InterruptedException {
    // 1. A thread.
    EpisodeOuterClass.Thread thread = ingest.withDeadlineAfter(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS)
        .createThread(CreateThreadRequest.newBuilder().setDataset(dataset).setLabel("car-search").build())
        .getThread();
    System.out.printf("thread %s created in %s (label %s)%n", thread.getThreadId(),
        thread.getDataset(), thread.getLabel());

    // 2. Messages, with idempotency keys: a retry of the same batch stores nothing twice.
    AddMessagesResponse added = ingest.withDeadlineAfter(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS)
        .addMessages(AddMessagesRequest.newBuilder().setThreadId(thread.getThreadId())
            .addMessages(NewMessage.newBuilder().setRole(Role.ROLE_USER)
                .setContent("I need a family car under $30k, SUVs feel too big.")
                .setIdempotencyKey("java-1"))
            .addMessages(NewMessage.newBuilder().setRole(Role.ROLE_ASSISTANT)
                .setContent("The Toyota Corolla Hybrid fits city commuting and your budget.")
                .setIdempotencyKey("java-2"))
            .addMessages(NewMessage.newBuilder().setRole(Role.ROLE_USER)
                .setContent("Great, the Corolla Hybrid it is. Book a test drive for Saturday.")
                .setIdempotencyKey("java-3"))
            .build());
    List<String> receipts = new ArrayList<>();
    for (MessageReceipt r : added.getReceiptsList()) {
      receipts.add("#" + r.getSequence() + " " + r.getIdempotencyKey() + " stored=" + r.getStored());
    }
    System.out.printf("messages stored %d: %s%n", added.getStoredCount(), String.join("; ", receipts));

    // 3. A bad request: a message without a role. The error says which field, for machines.
    try {
      ingest.withDeadlineAfter(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS)
          .addMessages(AddMessagesRequest.newBuilder().setThreadId(thread.getThreadId())
              .addMessages(NewMessage.newBuilder().setContent("a message without a role"))
              .build());
      throw fail("a message without a role was accepted");
    } catch (StatusRuntimeException err) {
      if (err.getStatus().getCode() != Status.Code.INVALID_ARGUMENT) {
        throw fail("a message without a role: want INVALID_ARGUMENT, got " + describe(err));
      }
      System.out.println("bad request: " + describe(err));
      ErrorInfo info = errorInfo(err);
      if (info == null || !"messages[0].role".equals(info.getMetadataMap().get("field"))) {
        throw fail("the error names no field messages[0].role in its ErrorInfo: " + describe(err));
      }
    }

    // 4. A call with a deadline that cannot be met: the client gives up, not the server.
    try {
      recall.withDeadlineAfter(1, TimeUnit.NANOSECONDS)
          .listEpisodes(ListEpisodesRequest.newBuilder().setDataset(dataset).build());
      throw fail("a 1 ns deadline was met");
    } catch (StatusRuntimeException err) {
      if (err.getStatus().getCode() != Status.Code.DEADLINE_EXCEEDED) {
        throw fail("a 1 ns deadline: want DEADLINE_EXCEEDED, got " + describe(err));
      }
      System.out.println("deadline: " + err.getStatus().getCode());
    }

    // 5. Without the key, where the suite requires one.
    if (!key.isEmpty()) {
      ManagedChannel bare = dial(recallAddress, "");
      try {
        RecallServiceGrpc.newBlockingStub(bare).withDeadlineAfter(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS)
            .listEpisodes(ListEpisodesRequest.newBuilder().setDataset(dataset).build());
        System.out.println("no key: accepted (the suite runs in development mode)");
      } catch (StatusRuntimeException err) {
        if (err.getStatus().getCode() != Status.Code.UNAUTHENTICATED) {
          throw fail("no key: " + describe(err));
        }
        System.out.println("no key: " + describe(err));
      } finally {
        bare.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
      }
    }

    // 6. End the thread: its episode is queued, then summarised in the background.
    EndThreadResponse ended = ingest.withDeadlineAfter(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS)
        .endThread(EndThreadRequest.newBuilder().setThreadId(thread.getThreadId()).build());
    if (!ended.getEpisodeQueued()) {
      throw fail("EndThread queued no episode");
    }
    System.out.printf("thread ended: episode queued (id \"%s\")%n", ended.getEpisodeId());
    long last = added.getReceipts(added.getReceiptsCount() - 1).getSequence();
    Episode episode = waitForEpisode(recall, dataset, thread.getThreadId(), ended.getEpisodeId(), last);
    System.out.println("summary: " + episode.getSummary());

    // 7. Recall it.
    RecalledEpisodes found = recall.withDeadlineAfter(CALL_TIMEOUT_SECONDS, TimeUnit.SECONDS)
        .recall(RecallRequest.newBuilder().setDataset(dataset).setQuery("which car will I test drive?")
            .addInclude(RecallInclude.RECALL_INCLUDE_EPISODES).build())
        .getEpisodes();
    if (found.getEpisodesCount() == 0) {
      throw fail("Recall found no episode");
    }
    ScoredEpisode top = found.getEpisodes(0);
    System.out.printf(Locale.ROOT, "recall: %d episode(s), top %s relevance %.3f%n", found.getEpisodeCount(),
        top.getEpisode().getEpisodeId(), top.getRelevanceScore());
    if (!top.getEpisode().getEpisodeId().equals(episode.getEpisodeId())) {
      throw fail("Recall's top episode is " + top.getEpisode().getEpisodeId() + ", not "
          + episode.getEpisodeId());
    }
  }
}
