package server

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/appserver/appserver/api"
)

// registerPlugins installs the plugin/* methods. appserver has no plugins:
// it answers as the reference does with `features.plugins` off, after the
// same checks of the params (docs/protocol.md §4.36). Nothing here reads
// or writes a file, so no path a client names is ever opened.
func (s *Server) registerPlugins() {
	s.Handle("plugin/list", func(_ context.Context, c *Call) (any, error) {
		var p api.PluginListParams
		if err := DecodeParams(c, &p); err != nil {
			return nil, err
		}
		if err := absolutePaths(p.Cwds); err != nil {
			return nil, err
		}
		for _, k := range p.MarketplaceKinds {
			if err := oneOfVariants(string(k), api.PluginMarketplaceLocal, api.PluginMarketplaceVertical,
				api.PluginMarketplaceWorkspaceDirectory, api.PluginMarketplaceSharedWithMe, api.PluginMarketplaceCreatedByMeRemote); err != nil {
				return nil, err
			}
		}
		return api.PluginListResult{}, nil
	})
	s.Handle("plugin/installed", func(_ context.Context, c *Call) (any, error) {
		var p api.PluginInstalledParams
		if err := DecodeParams(c, &p); err != nil {
			return nil, err
		}
		if err := absolutePaths(p.Cwds); err != nil {
			return nil, err
		}
		// The TUI calls this at start-up and on every composer refresh,
		// and takes the empty answer as "none".
		return api.PluginInstalledResult{}, nil
	})
	s.Handle("plugin/read", func(_ context.Context, c *Call) (any, error) {
		var p api.PluginReadParams
		if err := DecodeParams(c, &p, "pluginName"); err != nil {
			return nil, err
		}
		if err := pluginSource(c.Method, "read", p.MarketplacePath, p.RemoteMarketplaceName); err != nil {
			return nil, err
		}
		return nil, InvalidRequest("plugins feature is disabled")
	})
	s.Handle("plugin/install", func(_ context.Context, c *Call) (any, error) {
		var p api.PluginInstallParams
		if err := DecodeParams(c, &p, "pluginName"); err != nil {
			return nil, err
		}
		if err := pluginSource(c.Method, "install", p.MarketplacePath, p.RemoteMarketplaceName); err != nil {
			return nil, err
		}
		// The reference installs a local marketplace's plugin even with
		// plugins off (it stays inactive); appserver has no plugins to
		// install it into.
		return nil, InvalidRequest("plugins feature is disabled")
	})
	s.Handle("plugin/uninstall", func(_ context.Context, c *Call) (any, error) {
		var p api.PluginUninstallParams
		if err := DecodeParams(c, &p, "pluginId"); err != nil {
			return nil, err
		}
		switch {
		case validLocalPluginID(p.PluginID):
			// Not installed, so uninstalled already.
			return api.PluginUninstallResult{}, nil
		case validRemotePluginID(p.PluginID):
			return nil, InvalidRequest("remote plugin uninstall is not enabled")
		}
		return nil, InvalidRequest("invalid remote plugin id")
	})
	s.Handle("plugin/reconcile", func(_ context.Context, c *Call) (any, error) {
		var p api.PluginReconcileParams
		if err := DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return api.PluginReconcileResult{}, nil
	})
	s.Handle("plugin/search", func(_ context.Context, c *Call) (any, error) {
		var p api.PluginSearchParams
		if err := DecodeParams(c, &p, "searchTerm"); err != nil {
			return nil, err
		}
		if p.Scope != nil {
			if err := oneOfVariants(string(*p.Scope), api.PluginSearchGlobal, api.PluginSearchWorkspace, api.PluginSearchPersonal); err != nil {
				return nil, err
			}
		}
		if err := absolutePaths(p.Cwds); err != nil {
			return nil, err
		}
		return api.PluginSearchResult{}, nil
	})
	s.Handle("plugin/skill/read", func(_ context.Context, c *Call) (any, error) {
		var p api.PluginSkillReadParams
		if err := DecodeParams(c, &p, "remoteMarketplaceName", "remotePluginId", "skillName"); err != nil {
			return nil, err
		}
		return nil, InvalidRequest("remote plugin skill read is not enabled for marketplace %s", p.RemoteMarketplaceName)
	})
	sharingOff := func() error { return InvalidRequest("plugin sharing is not enabled") }
	s.Handle("plugin/share/list", func(_ context.Context, c *Call) (any, error) {
		var p api.PluginShareListParams
		if err := DecodeParams(c, &p); err != nil {
			return nil, err
		}
		return nil, sharingOff()
	})
	s.Handle("plugin/share/save", func(_ context.Context, c *Call) (any, error) {
		var p api.PluginShareSaveParams
		if err := DecodeParams(c, &p, "pluginPath"); err != nil {
			return nil, err
		}
		if err := absolutePaths([]string{p.PluginPath}); err != nil {
			return nil, err
		}
		if p.Discoverability != nil {
			if err := oneOfVariants(string(*p.Discoverability), api.PluginShareListed, api.PluginShareUnlisted, api.PluginSharePrivate); err != nil {
				return nil, err
			}
		}
		return nil, sharingOff()
	})
	s.Handle("plugin/share/checkout", func(_ context.Context, c *Call) (any, error) {
		var p api.PluginShareCheckoutParams
		if err := DecodeParams(c, &p, "remotePluginId"); err != nil {
			return nil, err
		}
		return nil, sharingOff()
	})
	s.Handle("plugin/share/delete", func(_ context.Context, c *Call) (any, error) {
		var p api.PluginShareDeleteParams
		if err := DecodeParams(c, &p, "remotePluginId"); err != nil {
			return nil, err
		}
		return nil, sharingOff()
	})
	s.Handle("plugin/share/updateTargets", func(_ context.Context, c *Call) (any, error) {
		var p api.PluginShareUpdateTargetsParams
		if err := DecodeParams(c, &p, "remotePluginId", "discoverability", "shareTargets"); err != nil {
			return nil, err
		}
		if err := oneOfVariants(string(p.Discoverability), api.PluginShareUpdateUnlisted, api.PluginShareUpdatePrivate, api.PluginShareUpdateListed); err != nil {
			return nil, err
		}
		return nil, sharingOff()
	})
}

// pluginSource checks that exactly one of a local marketplace path
// (absolute) and a remote marketplace name is given, and refuses the
// remote ones: no remote marketplace is reachable. verb names the
// operation in that refusal.
func pluginSource(method, verb string, path, remote *string) error {
	if path != nil {
		if err := absolutePaths([]string{*path}); err != nil {
			return err
		}
	}
	if (path == nil) == (remote == nil) {
		return InvalidRequest("%s requires exactly one of marketplacePath or remoteMarketplaceName", method)
	}
	if remote != nil {
		return InvalidRequest("remote plugin %s is not enabled for marketplace %s", verb, *remote)
	}
	return nil
}

// absolutePaths refuses a relative path as the reference's decoding of an
// absolute path does.
func absolutePaths(paths []string) error {
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			return InvalidRequest("Invalid request: AbsolutePathBuf deserialized without a base path")
		}
	}
	return nil
}

// oneOfVariants refuses v unless it is one of the values of an enum, as
// the reference's decoding does, naming them in their order.
func oneOfVariants[T ~string](v string, values ...T) error {
	if slices.Contains(values, T(v)) {
		return nil
	}
	names := make([]string, len(values))
	for i, x := range values {
		names[i] = fmt.Sprintf("`%s`", x)
	}
	return InvalidRequest("Invalid request: unknown variant `%s`, expected one of %s", v, strings.Join(names, ", "))
}

// validLocalPluginID reports whether id is a local plugin's id,
// `name@marketplace`: a name of ASCII letters, digits, '_', '-' and
// '.' (not first, not last, never two in a row) and a marketplace of
// ASCII letters, digits, '_' and '-'.
func validLocalPluginID(id string) bool {
	name, market, ok := strings.Cut(id, "@")
	if !ok || name == "" || market == "" || strings.Contains(market, "@") {
		return false
	}
	if name[0] == '.' || name[len(name)-1] == '.' || strings.Contains(name, "..") {
		return false
	}
	return idChars(name, ".") && idChars(market, "")
}

// validRemotePluginID reports whether id is shaped as a remote plugin's
// id: ASCII letters, digits, '_', '-' and '~'.
func validRemotePluginID(id string) bool {
	return id != "" && idChars(id, "~")
}

// idChars reports whether s holds only ASCII letters, digits, '_', '-'
// and the extra characters.
func idChars(s, extra string) bool {
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
		case strings.ContainsRune(extra, r):
		default:
			return false
		}
	}
	return true
}
