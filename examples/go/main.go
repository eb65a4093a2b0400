// A Go backend calling episodic through the committed stubs (clients/stubs/go, package
// episodicv1): create a thread, write messages, end it, wait for its episode, recall it, and
// read the typed details of an error. Every call carries a deadline and the API key.
//
// Configuration, as the Python and TypeScript clients read it:
//
//	EPISODIC_INGEST_ADDRESS  host:port of the IngestService (default 127.0.0.1:50051)
//	EPISODIC_RECALL_ADDRESS  host:port of the RecallService (default 127.0.0.1:50054)
//	EPISODIC_API_KEY         sent as `authorization: Bearer <key>` (optional on a loopback
//	                         suite in development mode; required under EPISODIC_AUTH=required)
//	EPISODIC_DATASET         the dataset to write to (default go_example)
//
// It prints one line per step and exits 0 only when every step did what is expected.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	episodicv1 "episodic/stubs/episodic/v1"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

const (
	callTimeout    = 10 * time.Second  // the deadline of each call
	episodeTimeout = 120 * time.Second // how long to wait for the episode to be summarised
	pollInterval   = 200 * time.Millisecond
)

func env(name, fallback string) string {
	if value := os.Getenv(name); value != "" {
		return value
	}
	return fallback
}

// withKey sends the API key with every call of a connection.
func withKey(key string) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply interface{}, cc *grpc.ClientConn,
		invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if key != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

func dial(address, key string) *grpc.ClientConn {
	// Plaintext, as a suite on loopback serves; with TLS (EPISODIC_TLS_*), use
	// grpc.WithTransportCredentials(credentials.NewClientTLSFromFile(ca, "")) instead.
	conn, err := grpc.Dial(address, grpc.WithInsecure(), grpc.WithUnaryInterceptor(withKey(key)))
	if err != nil {
		fail("dial %s: %v", address, err)
	}
	return conn
}

// call is the context of one call: its deadline.
func call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), callTimeout)
}

func fail(format string, args ...interface{}) {
	fmt.Printf("FAIL "+format+"\n", args...)
	os.Exit(1)
}

// describe reads a gRPC error the way a backend should: the code, the message, and the typed
// details the suite attaches (google.rpc.ErrorInfo always; RetryInfo when it asks to wait;
// BadRequest from servers that send one).
func describe(err error) string {
	st := status.Convert(err)
	parts := []string{fmt.Sprintf("code=%s message=%q", st.Code(), st.Message())}
	for _, detail := range st.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			keys := make([]string, 0, len(d.Metadata))
			for k := range d.Metadata {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			meta := make([]string, 0, len(keys))
			for _, k := range keys {
				meta = append(meta, k+"="+d.Metadata[k])
			}
			parts = append(parts, fmt.Sprintf("ErrorInfo{reason=%s domain=%s metadata={%s}}",
				d.Reason, d.Domain, strings.Join(meta, ",")))
		case *errdetails.BadRequest:
			for _, v := range d.FieldViolations {
				parts = append(parts, fmt.Sprintf("BadRequest{field=%s description=%q}",
					v.Field, v.Description))
			}
		case *errdetails.RetryInfo:
			parts = append(parts, fmt.Sprintf("RetryInfo{retry_delay=%s}", d.RetryDelay.AsDuration()))
		case error: // a detail whose type this program does not link
			parts = append(parts, fmt.Sprintf("undecoded detail: %v", d))
		default:
			parts = append(parts, fmt.Sprintf("detail %T", d))
		}
	}
	return strings.Join(parts, " ")
}

// errorInfo is the ErrorInfo of err, or nil.
func errorInfo(err error) *errdetails.ErrorInfo {
	for _, detail := range status.Convert(err).Details() {
		if info, ok := detail.(*errdetails.ErrorInfo); ok {
			return info
		}
	}
	return nil
}

// waitForEpisode polls, with a deadline, until the episode EndThread queued is COMPLETED.
// EndThread names it when the Scheduler answered in time; else it is the thread's episode
// that ends at the last message, once the Scheduler has queued it.
// waitAgain says whether a poll that failed with err is worth repeating: UNAVAILABLE (the
// service restarting, a connection reset) is, until the deadline, after a pause; any other
// code is an answer. Sleeps the pause when it says yes.
func waitAgain(err error, deadline time.Time) bool {
	if status.Code(err) != codes.Unavailable || time.Now().Add(pollInterval).After(deadline) {
		return false
	}
	fmt.Printf("poll: %s; polling again\n", describe(err))
	time.Sleep(pollInterval)
	return true
}

func waitForEpisode(recall episodicv1.RecallServiceClient, dataset, threadID, episodeID string,
	endSequence int64) *episodicv1.Episode {
	deadline := time.Now().Add(episodeTimeout)
	polls := 0
	for {
		polls++
		var episode *episodicv1.Episode
		ctx, cancel := call()
		if episodeID != "" {
			got, err := recall.GetEpisode(ctx, &episodicv1.GetEpisodeRequest{EpisodeId: episodeID})
			if err != nil {
				cancel()
				if waitAgain(err, deadline) {
					continue
				}
				fail("GetEpisode: %s", describe(err))
			}
			episode = got.Episode
		} else {
			page, err := recall.ListEpisodes(ctx, &episodicv1.ListEpisodesRequest{
				Dataset: dataset, ThreadId: threadID})
			if err != nil {
				cancel()
				if waitAgain(err, deadline) {
					continue
				}
				fail("ListEpisodes: %s", describe(err))
			}
			for _, e := range page.Episodes {
				if e.EndSequence == endSequence && e.Kind != episodicv1.EpisodeKind_EPISODE_KIND_EVENT {
					episode = e
				}
			}
		}
		cancel()
		if episode != nil {
			switch episode.Status {
			case episodicv1.EpisodeStatus_EPISODE_STATUS_COMPLETED:
				fmt.Printf("episode %s %s after %d poll(s)\n", episode.EpisodeId, episode.Status, polls)
				return episode
			case episodicv1.EpisodeStatus_EPISODE_STATUS_FAILED:
				fail("episode %s FAILED: %s", episode.EpisodeId, episode.Error)
			}
		}
		if time.Now().After(deadline) {
			fail("no COMPLETED episode for thread %s within %s", threadID, episodeTimeout)
		}
		time.Sleep(pollInterval)
	}
}

func main() {
	key := os.Getenv("EPISODIC_API_KEY")
	dataset := env("EPISODIC_DATASET", "go_example")
	ingestConn := dial(env("EPISODIC_INGEST_ADDRESS", "127.0.0.1:50051"), key)
	defer ingestConn.Close()
	recallConn := dial(env("EPISODIC_RECALL_ADDRESS", "127.0.0.1:50054"), key)
	defer recallConn.Close()
	ingest := episodicv1.NewIngestServiceClient(ingestConn)
	recall := episodicv1.NewRecallServiceClient(recallConn)

	// 1. A thread.
	ctx, cancel := call()
	created, err := ingest.CreateThread(ctx, &episodicv1.CreateThreadRequest{
		Dataset: dataset, Label: "car-search"})
	cancel()
	if err != nil {
		fail("CreateThread: %s", describe(err))
	}
	thread := created.Thread
	fmt.Printf("thread %s created in %s (label %s)\n", thread.ThreadId, thread.Dataset, thread.Label)

	// 2. Messages, with idempotency keys: a retry of the same batch stores nothing twice.
	turns := []*episodicv1.NewMessage{
		{Role: episodicv1.Role_ROLE_USER, Content: "I need a family car under $30k, SUVs feel too big.",
			IdempotencyKey: "go-1"},
		{Role: episodicv1.Role_ROLE_ASSISTANT,
			Content: "The Toyota Corolla Hybrid fits city commuting and your budget.", IdempotencyKey: "go-2"},
		{Role: episodicv1.Role_ROLE_USER,
			Content: "Great, the Corolla Hybrid it is. Book a test drive for Saturday.", IdempotencyKey: "go-3"},
	}
	ctx, cancel = call()
	added, err := ingest.AddMessages(ctx, &episodicv1.AddMessagesRequest{
		ThreadId: thread.ThreadId, Messages: turns})
	cancel()
	if err != nil {
		fail("AddMessages: %s", describe(err))
	}
	sequences := make([]string, 0, len(added.Receipts))
	for _, r := range added.Receipts {
		sequences = append(sequences, fmt.Sprintf("#%d %s stored=%t", r.Sequence, r.IdempotencyKey, r.Stored))
	}
	fmt.Printf("messages stored %d: %s\n", added.StoredCount, strings.Join(sequences, "; "))

	// 3. A bad request: a message without a role. The error says which field, for machines.
	ctx, cancel = call()
	_, err = ingest.AddMessages(ctx, &episodicv1.AddMessagesRequest{
		ThreadId: thread.ThreadId,
		Messages: []*episodicv1.NewMessage{{Content: "a message without a role"}}})
	cancel()
	if status.Code(err) != codes.InvalidArgument {
		fail("a message without a role: want INVALID_ARGUMENT, got %v", err)
	}
	fmt.Printf("bad request: %s\n", describe(err))
	if info := errorInfo(err); info == nil || info.Metadata["field"] != "messages[0].role" {
		fail("the error names no field messages[0].role in its ErrorInfo: %s", describe(err))
	}

	// 4. A call with a deadline that cannot be met: the client gives up, not the server.
	tight, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	_, err = recall.ListEpisodes(tight, &episodicv1.ListEpisodesRequest{Dataset: dataset})
	cancel()
	if status.Code(err) != codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
		fail("a 1 ns deadline: want DEADLINE_EXCEEDED, got %v", err)
	}
	fmt.Printf("deadline: %s\n", status.Code(err))

	// 5. Without the key, where the suite requires one.
	if key != "" {
		bare := dial(env("EPISODIC_RECALL_ADDRESS", "127.0.0.1:50054"), "")
		ctx, cancel = call()
		_, err = episodicv1.NewRecallServiceClient(bare).ListEpisodes(ctx,
			&episodicv1.ListEpisodesRequest{Dataset: dataset})
		cancel()
		bare.Close()
		switch status.Code(err) {
		case codes.Unauthenticated:
			fmt.Printf("no key: %s\n", describe(err))
		case codes.OK:
			fmt.Printf("no key: accepted (the suite runs in development mode)\n")
		default:
			fail("no key: %s", describe(err))
		}
	}

	// 6. End the thread: its episode is queued, then summarised in the background.
	ctx, cancel = call()
	ended, err := ingest.EndThread(ctx, &episodicv1.EndThreadRequest{ThreadId: thread.ThreadId})
	cancel()
	if err != nil {
		fail("EndThread: %s", describe(err))
	}
	if !ended.EpisodeQueued {
		fail("EndThread queued no episode")
	}
	fmt.Printf("thread ended: episode queued (id %q)\n", ended.EpisodeId)
	last := added.Receipts[len(added.Receipts)-1].Sequence
	episode := waitForEpisode(recall, dataset, thread.ThreadId, ended.EpisodeId, last)
	fmt.Printf("summary: %s\n", episode.Summary)

	// 7. Recall it.
	ctx, cancel = call()
	recalled, err := recall.Recall(ctx, &episodicv1.RecallRequest{
		Dataset: dataset, Query: "which car will I test drive?",
		Include: []episodicv1.RecallInclude{episodicv1.RecallInclude_RECALL_INCLUDE_EPISODES}})
	cancel()
	if err != nil {
		fail("Recall: %s", describe(err))
	}
	found := recalled.Episodes
	if found == nil || len(found.Episodes) == 0 {
		fail("Recall found no episode")
	}
	top := found.Episodes[0]
	fmt.Printf("recall: %d episode(s), top %s relevance %.3f\n",
		found.EpisodeCount, top.Episode.EpisodeId, top.RelevanceScore)
	if top.Episode.EpisodeId != episode.EpisodeId {
		fail("Recall's top episode is %s, not %s", top.Episode.EpisodeId, episode.EpisodeId)
	}
	fmt.Println("OK")
}
