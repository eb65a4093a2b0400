/**
 * @episodic/client — the TypeScript SDK of episodic (episodic memory for AI agents).
 *
 *     import { EpisodicClient, renderEpisodes } from "@episodic/client";
 *
 *     const memory = new EpisodicClient(); // addresses from EPISODIC_*_ADDRESS/_PORT
 *     const thread = await memory.startThread("user_42", { label: "car-search" });
 *     await memory.addMessages(thread.threadId, [["user", "I need a family car under $30k."]]);
 *     await memory.endThread(thread.threadId);
 *     await memory.waitForEpisode(thread.threadId);
 *     console.log(renderEpisodes(await memory.recall("user_42", "car recommendations")));
 *     memory.close();
 */

export * from "./client.js";
export * from "./errors.js";
export * from "./render.js";
export * from "./endpoints.js";

// The wire types, generated from proto/ by protoc-gen-es (no hand-written message types).
export {
  EpisodeKind,
  EpisodeStatus,
  EpisodeTrigger,
  EventSource,
  Outcome,
  Role,
  SemanticStatus,
  EpisodeSchema,
  ScoredEpisodeSchema,
  ThreadSchema,
  MessageSchema,
  ToolCallSchema,
  ProcedureSchema,
  ScoredProcedureSchema,
} from "./gen/episodic/v1/episode_pb.js";
export type {
  Episode,
  Message,
  Procedure,
  ProcedureArgument,
  ProcedureSource,
  ProcedureStep,
  ScoredEpisode,
  ScoredProcedure,
  Thread,
  ToolCall,
} from "./gen/episodic/v1/episode_pb.js";
export type {
  EndThreadResponse,
  MessageReceipt,
  RecordOutcomeResponse,
} from "./gen/episodic/v1/ingest_service_pb.js";
export type { QueryUnderstanding, SessionOrdinal, TimeExpression } from "./gen/episodic/v1/recall_service_pb.js";
export type { Entity, EntityAlias } from "./gen/episodic/v1/entity_pb.js";
export type { RunSweepResponse } from "./gen/episodic/v1/scheduler_service_pb.js";
export type {
  EpisodeError,
  GetPipelineStatusResponse,
  ProcessPendingResponse,
  ProviderHealth,
} from "./gen/episodic/v1/summariser_service_pb.js";
export { LanguageOrigin } from "./gen/episodic/v1/admin_service_pb.js";
export type {
  DatasetPolicy,
  DatasetSummary,
  ErasureReceipt,
} from "./gen/episodic/v1/admin_service_pb.js";
export { ErrorInfoSchema, RetryInfoSchema } from "./gen/google/rpc/error_details_pb.js";
export type { ErrorInfo, RetryInfo } from "./gen/google/rpc/error_details_pb.js";
// The service descriptors, for callers who want the raw Connect clients (AdminService:
// API keys and the audit log, served by Ingest, are not wrapped by EpisodicClient — like
// the Python SDK, it wraps the datasets, erasure, policy and entity calls).
export { AdminService } from "./gen/episodic/v1/admin_service_pb.js";
export { AccessRole } from "./gen/episodic/v1/access_pb.js";
export { IngestService } from "./gen/episodic/v1/ingest_service_pb.js";
export { RecallService } from "./gen/episodic/v1/recall_service_pb.js";
export { SchedulerService } from "./gen/episodic/v1/scheduler_service_pb.js";
export { SummariserService } from "./gen/episodic/v1/summariser_service_pb.js";
// Timestamp helpers: Timestamps on the wire ↔ Dates.
export { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
export type { Timestamp } from "@bufbuild/protobuf/wkt";
