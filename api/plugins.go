package api

import "encoding/json"

// The plugin/* methods as appserver answers them: it has no plugins (the
// reference's plugin marketplace is its hosted product), so it answers as
// the reference does with `features.plugins` off: empty lists, nothing to
// reconcile or uninstall, and refusals for what would read, install or
// share a plugin (docs/protocol.md §4.36).

// PluginListMarketplaceKind is a kind of marketplace plugin/list may query.
type PluginListMarketplaceKind string

// The values of PluginListMarketplaceKind, in the reference's order.
const (
	PluginMarketplaceLocal              PluginListMarketplaceKind = "local"
	PluginMarketplaceVertical           PluginListMarketplaceKind = "vertical"
	PluginMarketplaceWorkspaceDirectory PluginListMarketplaceKind = "workspace-directory"
	PluginMarketplaceSharedWithMe       PluginListMarketplaceKind = "shared-with-me"
	PluginMarketplaceCreatedByMeRemote  PluginListMarketplaceKind = "created-by-me-remote"
)

// PluginListParams are the params of plugin/list.
type PluginListParams struct {
	// Cwds are working directories whose repository marketplaces are
	// searched; absolute.
	Cwds []string `json:"cwds,omitempty"`
	// ForceRefetch asks for a fresh remote catalog.
	ForceRefetch *bool `json:"forceRefetch,omitempty"`
	// MarketplaceKinds filters the marketplaces queried.
	MarketplaceKinds []PluginListMarketplaceKind `json:"marketplaceKinds,omitempty"`
}

// PluginListResult is the result of plugin/list: with no plugins, every
// list is empty.
type PluginListResult struct {
	// Marketplaces are the marketplaces with their plugins.
	Marketplaces List[json.RawMessage] `json:"marketplaces"`
	// MarketplaceLoadErrors are marketplaces that failed to load.
	MarketplaceLoadErrors List[json.RawMessage] `json:"marketplaceLoadErrors"`
	// FeaturedPluginIDs are the plugins the catalog features.
	FeaturedPluginIDs List[string] `json:"featuredPluginIds"`
}

// PluginInstalledParams are the params of plugin/installed.
type PluginInstalledParams struct {
	// Cwds are working directories whose repository marketplaces are
	// searched; absolute.
	Cwds []string `json:"cwds,omitempty"`
	// InstallSuggestionPluginNames are uninstalled plugins to list when
	// present locally.
	InstallSuggestionPluginNames []string `json:"installSuggestionPluginNames,omitempty"`
}

// PluginInstalledResult is the result of plugin/installed: appserver has
// no plugin marketplaces, so both lists are empty.
type PluginInstalledResult struct {
	// Marketplaces are the installed marketplaces with their plugins.
	Marketplaces List[json.RawMessage] `json:"marketplaces"`
	// MarketplaceLoadErrors are marketplaces that failed to load.
	MarketplaceLoadErrors List[json.RawMessage] `json:"marketplaceLoadErrors"`
}

// PluginReadParams are the params of plugin/read: exactly one of
// MarketplacePath and RemoteMarketplaceName names where the plugin is.
type PluginReadParams struct {
	// PluginName is the plugin; required.
	PluginName string `json:"pluginName"`
	// MarketplacePath is a local marketplace file, absolute.
	MarketplacePath *string `json:"marketplacePath,omitempty"`
	// RemoteMarketplaceName is a remote marketplace.
	RemoteMarketplaceName *string `json:"remoteMarketplaceName,omitempty"`
}

// PluginReadResult is the result of plugin/read. appserver never sends
// one: it has no plugin to describe.
type PluginReadResult struct {
	// Plugin is the plugin's detail.
	Plugin Map[json.RawMessage] `json:"plugin"`
}

// PluginInstallParams are the params of plugin/install: exactly one of
// MarketplacePath and RemoteMarketplaceName names where the plugin is.
type PluginInstallParams struct {
	// PluginName is the plugin; required.
	PluginName string `json:"pluginName"`
	// MarketplacePath is a local marketplace file, absolute.
	MarketplacePath *string `json:"marketplacePath,omitempty"`
	// RemoteMarketplaceName is a remote marketplace.
	RemoteMarketplaceName *string `json:"remoteMarketplaceName,omitempty"`
	// InstallAttemptID correlates one installation attempt.
	InstallAttemptID *string `json:"installAttemptId,omitempty"`
}

// PluginAuthPolicy is when a plugin's apps ask for authentication.
type PluginAuthPolicy string

// The values of PluginAuthPolicy.
const (
	PluginAuthOnInstall PluginAuthPolicy = "ON_INSTALL"
	PluginAuthOnUse     PluginAuthPolicy = "ON_USE"
)

// PluginInstallResult is the result of plugin/install. appserver never
// sends one: it installs no plugins.
type PluginInstallResult struct {
	// AuthPolicy is the installed plugin's.
	AuthPolicy PluginAuthPolicy `json:"authPolicy"`
	// AppsNeedingAuth are the plugin's apps still to authenticate.
	AppsNeedingAuth List[json.RawMessage] `json:"appsNeedingAuth"`
}

// PluginUninstallParams are the params of plugin/uninstall.
type PluginUninstallParams struct {
	// PluginID is `name@marketplace` for a local plugin, else a remote
	// plugin's id; required.
	PluginID string `json:"pluginId"`
}

// PluginUninstallResult is the result of plugin/uninstall: a local
// plugin that is not installed is uninstalled already.
type PluginUninstallResult struct{}

// PluginReconcileParams are the params of plugin/reconcile.
type PluginReconcileParams struct {
	// Reason is recorded with the reconciliation.
	Reason *string `json:"reason,omitempty"`
}

// PluginReconcileResult is the result of plugin/reconcile: with no
// plugins nothing changes.
type PluginReconcileResult struct {
	// ChangedPlugins are the plugins a change affected.
	ChangedPlugins List[json.RawMessage] `json:"changedPlugins"`
	// FailedRemotePluginIDs are remote plugins whose update failed.
	FailedRemotePluginIDs List[string] `json:"failedRemotePluginIds"`
	// FailedMaterializationRemotePluginIDs are those whose bundle could
	// not be materialized.
	FailedMaterializationRemotePluginIDs List[string] `json:"failedMaterializationRemotePluginIds"`
}

// PluginSearchScope is where plugin/search looks.
type PluginSearchScope string

// The values of PluginSearchScope, in the reference's order.
const (
	PluginSearchGlobal    PluginSearchScope = "global"
	PluginSearchWorkspace PluginSearchScope = "workspace"
	PluginSearchPersonal  PluginSearchScope = "personal"
)

// PluginSearchParams are the params of plugin/search (experimental).
type PluginSearchParams struct {
	// SearchTerm is what to look for; required.
	SearchTerm string `json:"searchTerm"`
	// Cwds are working directories whose marketplaces are searched;
	// absolute.
	Cwds []string `json:"cwds,omitempty"`
	// Scope is where to look.
	Scope *PluginSearchScope `json:"scope,omitempty"`
	// Limit bounds a page.
	Limit *uint32 `json:"limit,omitempty"`
	// Cursor continues a previous page.
	Cursor *string `json:"cursor,omitempty"`
}

// PluginSearchResult is the result of plugin/search: nothing is found.
type PluginSearchResult struct {
	// Data are the plugins found.
	Data List[json.RawMessage] `json:"data"`
	// NextCursor continues the search; null at its end.
	NextCursor *string `json:"nextCursor"`
}

// PluginSkillReadParams are the params of plugin/skill/read.
type PluginSkillReadParams struct {
	// RemoteMarketplaceName, RemotePluginID and SkillName name the skill;
	// all required.
	RemoteMarketplaceName string `json:"remoteMarketplaceName"`
	RemotePluginID        string `json:"remotePluginId"`
	SkillName             string `json:"skillName"`
}

// PluginSkillReadResult is the result of plugin/skill/read. appserver
// never sends one: it reaches no remote marketplace.
type PluginSkillReadResult struct {
	// Contents is the skill's text.
	Contents *string `json:"contents"`
}

// PluginShareDiscoverability is who finds a shared plugin.
type PluginShareDiscoverability string

// The values of PluginShareDiscoverability, in the reference's order.
const (
	PluginShareListed   PluginShareDiscoverability = "LISTED"
	PluginShareUnlisted PluginShareDiscoverability = "UNLISTED"
	PluginSharePrivate  PluginShareDiscoverability = "PRIVATE"
)

// PluginShareUpdateDiscoverability is the discoverability
// plugin/share/updateTargets sets.
type PluginShareUpdateDiscoverability string

// The values of PluginShareUpdateDiscoverability, in the reference's
// order.
const (
	PluginShareUpdateUnlisted PluginShareUpdateDiscoverability = "UNLISTED"
	PluginShareUpdatePrivate  PluginShareUpdateDiscoverability = "PRIVATE"
	PluginShareUpdateListed   PluginShareUpdateDiscoverability = "LISTED"
)

// PluginShareListParams are the params of plugin/share/list: none.
type PluginShareListParams struct{}

// PluginShareListResult is the result of plugin/share/list. appserver
// never sends one: plugin sharing is the reference's hosted product.
type PluginShareListResult struct {
	// Data are the shared plugins.
	Data List[json.RawMessage] `json:"data"`
}

// PluginShareSaveParams are the params of plugin/share/save.
type PluginShareSaveParams struct {
	// PluginPath is the plugin's directory, absolute; required.
	PluginPath string `json:"pluginPath"`
	// RemotePluginID updates an existing share.
	RemotePluginID *string `json:"remotePluginId,omitempty"`
	// Discoverability is who finds the share.
	Discoverability *PluginShareDiscoverability `json:"discoverability,omitempty"`
	// ShareTargets are who the plugin is shared with.
	ShareTargets []json.RawMessage `json:"shareTargets,omitempty"`
}

// PluginShareSaveResult is the result of plugin/share/save. appserver
// never sends one.
type PluginShareSaveResult struct {
	// RemotePluginID is the share's id.
	RemotePluginID string `json:"remotePluginId"`
	// ShareURL is where the share is found.
	ShareURL string `json:"shareUrl"`
	// CanPublishToWorkspace reports whether the share may be published.
	CanPublishToWorkspace *bool `json:"canPublishToWorkspace"`
}

// PluginShareCheckoutParams are the params of plugin/share/checkout.
type PluginShareCheckoutParams struct {
	// RemotePluginID is the share; required.
	RemotePluginID string `json:"remotePluginId"`
}

// PluginShareCheckoutResult is the result of plugin/share/checkout.
// appserver never sends one.
type PluginShareCheckoutResult struct {
	// MarketplaceName and MarketplacePath are the marketplace the plugin
	// was checked out into.
	MarketplaceName string `json:"marketplaceName"`
	MarketplacePath string `json:"marketplacePath"`
	// PluginID, PluginName and PluginPath are the local plugin.
	PluginID   string `json:"pluginId"`
	PluginName string `json:"pluginName"`
	PluginPath string `json:"pluginPath"`
	// RemotePluginID and RemoteVersion are the share checked out.
	RemotePluginID string  `json:"remotePluginId"`
	RemoteVersion  *string `json:"remoteVersion"`
}

// PluginShareDeleteParams are the params of plugin/share/delete.
type PluginShareDeleteParams struct {
	// RemotePluginID is the share; required.
	RemotePluginID string `json:"remotePluginId"`
}

// PluginShareDeleteResult is the result of plugin/share/delete.
// appserver never sends one.
type PluginShareDeleteResult struct{}

// PluginShareUpdateTargetsParams are the params of
// plugin/share/updateTargets.
type PluginShareUpdateTargetsParams struct {
	// RemotePluginID is the share; required.
	RemotePluginID string `json:"remotePluginId"`
	// Discoverability is who finds the share; required.
	Discoverability PluginShareUpdateDiscoverability `json:"discoverability"`
	// ShareTargets are who the plugin is shared with; required.
	ShareTargets []json.RawMessage `json:"shareTargets"`
}

// PluginShareUpdateTargetsResult is the result of
// plugin/share/updateTargets. appserver never sends one.
type PluginShareUpdateTargetsResult struct {
	// Discoverability is the share's, as set.
	Discoverability PluginShareDiscoverability `json:"discoverability"`
	// Principals are who the plugin is shared with.
	Principals List[json.RawMessage] `json:"principals"`
}
