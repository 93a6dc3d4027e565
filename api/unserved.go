package api

// The reasons api.Unserved gives, one per family of the protocol appserver
// leaves out.
const (
	// NotBuilt is part of the protocol appserver means to serve and does
	// not yet.
	NotBuilt = "not built yet"
	// HostedAccount needs the reference's hosted product: a ChatGPT login,
	// OpenAI accounts and workspaces, or signals of OpenAI's backend.
	HostedAccount = "hosted product: ChatGPT login and OpenAI accounts"
	// HostedPlugins needs the reference's plugin marketplace, apps and
	// connectors.
	HostedPlugins = "hosted product: plugin marketplace and apps"
	// HostedRemoteControl needs the reference's remote-control relay.
	HostedRemoteControl = "hosted product: remote control through its relay"
	// HostedRealtime needs the reference's realtime voice sessions.
	HostedRealtime = "hosted product: realtime voice"
	// HostedProjects needs the reference's projects and thread sections.
	HostedProjects = "hosted product: projects and sections"
	// HostedWindowsSandbox is the reference's Windows sandbox; appserver
	// runs on Linux.
	HostedWindowsSandbox = "Windows sandbox"
	// Legacy is the v1 approval flow; appserver sends the v2 requests.
	Legacy = "legacy v1 API: appserver sends the v2 approval requests"
	// Deprecated is a notification the reference keeps for old clients
	// and appserver does not send.
	Deprecated = "deprecated by the reference"
	// TestOnly is a method the reference keeps for its own tests.
	TestOnly = "the reference's test-only method"
)

// Unserved lists every method of the protocol schema (ProtocolVersion)
// that appserver neither serves (a client request: answered -32601) nor
// sends (a notification or server request), with why. It is the one place
// that says so: docs/protocol-methods.md is generated from it, and the
// drift test of internal/server fails when a method of the schema is
// neither served nor listed here, or served and still listed. Serving a
// method means taking it out of this list, giving it a handler and its
// wire types (see api/wiretypes_test.go), and running go generate ./api.
var Unserved = map[string]string{
	"account/bedrock/discover":                 NotBuilt,
	"account/bedrock/setup":                    NotBuilt,
	"account/chatgptAuthTokens/refresh":        HostedAccount,
	"account/gatewayOAuth/cancel":              HostedAccount,
	"account/gatewayOAuth/changed":             HostedAccount,
	"account/gatewayOAuth/login":               HostedAccount,
	"account/gatewayOAuth/read":                HostedAccount,
	"account/gcp/setup":                        NotBuilt,
	"account/login/cancel":                     HostedAccount,
	"account/login/completed":                  HostedAccount,
	"account/login/start":                      HostedAccount,
	"account/rateLimitResetCredit/consume":     HostedAccount,
	"account/securitySetup/read":               HostedAccount,
	"account/sendAddCreditsNudgeEmail":         HostedAccount,
	"account/workspaceMessages/read":           HostedAccount,
	"accountSession/list":                      HostedAccount,
	"accountSession/switch":                    HostedAccount,
	"app/installed":                            HostedPlugins,
	"app/list":                                 HostedPlugins,
	"app/list/updated":                         HostedPlugins,
	"app/read":                                 HostedPlugins,
	"applyPatchApproval":                       Legacy,
	"attestation/generate":                     HostedAccount,
	"autoApprovalReview/strictReviewRequired":  NotBuilt,
	"deprecationNotice":                        NotBuilt,
	"environment/add":                          NotBuilt,
	"environment/info":                         NotBuilt,
	"environment/status":                       NotBuilt,
	"execCommandApproval":                      Legacy,
	"externalAgentConfig/import/readHistories": NotBuilt,
	"externalAgentConfig/import/recordHistory": NotBuilt,
	"feedback/upload":                          HostedAccount,
	"guardianWarning":                          NotBuilt,
	"hook/completed":                           NotBuilt,
	"hook/started":                             NotBuilt,
	"item/autoApprovalReview/completed":        NotBuilt,
	"item/autoApprovalReview/started":          NotBuilt,
	"item/fileChange/outputDelta":              Deprecated,
	"item/fileChange/patchUpdated":             NotBuilt,
	"item/permissions/requestApproval":         NotBuilt,
	"item/plan/delta":                          NotBuilt,
	"marketplace/add":                          HostedPlugins,
	"marketplace/remove":                       HostedPlugins,
	"marketplace/upgrade":                      HostedPlugins,
	"mcpServer/event/stream/notification":      NotBuilt,
	"mcpServer/event/stream/start":             NotBuilt,
	"mcpServer/event/stream/stop":              NotBuilt,
	"mcpServer/oauth/login":                    NotBuilt,
	"mcpServer/oauthLogin/completed":           NotBuilt,
	"mock/experimentalMethod":                  TestOnly,
	"model/rerouted":                           NotBuilt,
	"model/safetyBuffering/updated":            HostedAccount,
	"model/verification":                       HostedAccount,
	"modelProvider/authRecoveryCompleted":      HostedAccount,
	"modelProvider/authRecoveryStarted":        HostedAccount,
	"project/changed":                          HostedProjects,
	"project/create":                           HostedProjects,
	"project/delete":                           HostedProjects,
	"project/import":                           HostedProjects,
	"project/list":                             HostedProjects,
	"project/move":                             HostedProjects,
	"project/read":                             HostedProjects,
	"project/update":                           HostedProjects,
	"remoteControl/client/list":                HostedRemoteControl,
	"remoteControl/client/revoke":              HostedRemoteControl,
	"remoteControl/disable":                    HostedRemoteControl,
	"remoteControl/enable":                     HostedRemoteControl,
	"remoteControl/pairing/start":              HostedRemoteControl,
	"remoteControl/pairing/status":             HostedRemoteControl,
	"remoteControl/status/changed":             HostedRemoteControl,
	"remoteControl/status/read":                HostedRemoteControl,
	"rollout/compress":                         NotBuilt,
	"thread/approveGuardianDeniedAction":       NotBuilt,
	"thread/attachment/add":                    NotBuilt,
	"thread/attachment/list":                   NotBuilt,
	"thread/attachment/remove":                 NotBuilt,
	"thread/attachment/updated":                NotBuilt,
	"thread/attachmentOwner/list":              NotBuilt,
	"thread/compacted":                         Deprecated,
	"thread/decrement_elicitation":             NotBuilt,
	"thread/environment/connected":             NotBuilt,
	"thread/environment/disconnected":          NotBuilt,
	"thread/guardianReview":                    NotBuilt,
	"thread/increment_elicitation":             NotBuilt,
	"thread/memory/read":                       NotBuilt,
	"thread/memoryMode/set":                    NotBuilt,
	"thread/prediction/request":                NotBuilt,
	"thread/prediction/updated":                NotBuilt,
	"thread/prepareApprovedPlan":               NotBuilt,
	"thread/project/updated":                   HostedProjects,
	"thread/realtime/appendAudio":              HostedRealtime,
	"thread/realtime/appendSpeech":             HostedRealtime,
	"thread/realtime/appendText":               HostedRealtime,
	"thread/realtime/closed":                   HostedRealtime,
	"thread/realtime/error":                    HostedRealtime,
	"thread/realtime/item/completed":           HostedRealtime,
	"thread/realtime/item/started":             HostedRealtime,
	"thread/realtime/item/transcript/delta":    HostedRealtime,
	"thread/realtime/itemAdded":                HostedRealtime,
	"thread/realtime/list":                     HostedRealtime,
	"thread/realtime/listVoices":               HostedRealtime,
	"thread/realtime/outputAudio/delta":        HostedRealtime,
	"thread/realtime/sdp":                      HostedRealtime,
	"thread/realtime/start":                    HostedRealtime,
	"thread/realtime/started":                  HostedRealtime,
	"thread/realtime/stop":                     HostedRealtime,
	"thread/realtime/transcript/delta":         HostedRealtime,
	"thread/realtime/transcript/done":          HostedRealtime,
	"thread/sample":                            NotBuilt,
	"thread/sample/cancel":                     NotBuilt,
	"thread/section/changed":                   HostedProjects,
	"thread/section/move":                      HostedProjects,
	"thread/timeline/list":                     NotBuilt,
	"threadSection/create":                     HostedProjects,
	"threadSection/delete":                     HostedProjects,
	"threadSection/list":                       HostedProjects,
	"threadSection/update":                     HostedProjects,
	"turn/moderationMetadata":                  HostedAccount,
	"userVerification/cancel":                  HostedAccount,
	"userVerification/delete":                  HostedAccount,
	"userVerification/enroll":                  HostedAccount,
	"userVerification/status":                  HostedAccount,
	"userVerification/verify":                  HostedAccount,
	"windows/worldWritableWarning":             HostedWindowsSandbox,
	"windowsSandbox/readiness":                 HostedWindowsSandbox,
	"windowsSandbox/setupCompleted":            HostedWindowsSandbox,
	"windowsSandbox/setupStart":                HostedWindowsSandbox,
}
