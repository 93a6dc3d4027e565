package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/server/rpcws"
	"github.com/appserver/appserver/internal/skills"
	"github.com/appserver/appserver/internal/store"
	"github.com/appserver/appserver/internal/tools/orchestrate"
	"github.com/appserver/appserver/internal/turns"
)

// core is what serve and mcp share, built from one configuration: the
// store, the hub, the skill catalog, the built-in tools and the turns
// manager.
type core struct {
	log     *slog.Logger
	metrics *server.Metrics
	st      store.Store // the group committer, which owns the backend
	where   string
	cwd     string
	hb      *hub.Hub
	cat     *skills.Catalog
	tools   *orchestrate.Service
	mgr     *turns.Manager
}

// newCore builds the core; close releases what it opened.
func newCore(ctx context.Context, cfg *config.Config, configFile string, log *slog.Logger) (c *core, err error) {
	c = &core{log: log, metrics: server.NewMetrics()}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	backend, where, err := openStore(ctx, cfg, cfg.MigrateOnStart(), c.metrics.ObserveStoreOp)
	if err != nil {
		return c, err
	}
	c.where = where
	// Items of many threads are committed together (group commit); the
	// committer owns the backend and closes it last, after every connection
	// and turn has stopped.
	c.st = store.NewGroupCommitter(backend, store.GroupCommitConfig{})
	if c.cwd, err = os.Getwd(); err != nil {
		return c, fmt.Errorf("working directory: %w", err)
	}
	// The hub: every client of a thread (websocket, HTTP or MCP) subscribes
	// there, notifications fan out from there, and it routes the server
	// requests (approvals and user input to every subscriber, dynamic tool
	// calls through its broker to one live client), one timeout rule per
	// kind.
	c.hb = hub.New(hub.Config{
		Approval:    hub.Timeouts{NoClient: cfg.ApprovalClientTimeout},
		UserInput:   hub.Timeouts{NoClient: cfg.ApprovalClientTimeout},
		ToolCall:    hub.Timeouts{NoClient: cfg.DynamicToolReconnectTimeout},
		Encode:      rpcws.EncodeNotification,
		ToolMetrics: c.metrics.DynamicMetrics(),
		Logger:      log,
	})
	// The skill catalog: the workspace's own skill folders always (for
	// skills/list), plus configured roots and remotes.
	if c.cat, err = skills.New(skillsConfig(cfg), skills.Options{Logger: log}); err != nil {
		return c, err
	}
	// Built-in tools: commands and patches under the thread's approval and
	// sandbox policies; approvals and user input reach the subscribed
	// clients through the hub.
	if c.tools, err = newTools(cfg, configFile, log, c.hb.Broker(), c.cat); err != nil {
		return c, err
	}
	c.mgr, err = turns.New(turns.Config{
		Store:                c.st,
		Notifier:             c.hb,
		Subscribers:          c.hb,
		Requests:             c.hb,
		Models:               modelRouter(cfg, log),
		Tools:                c.tools.Build,
		ValidateDynamicTools: orchestrate.ValidateDynamicTools,
		ThreadUnloaded:       c.tools.ThreadUnloaded,
		Defaults: turns.Defaults{
			Model:          cfg.Model,
			ModelProvider:  cfg.ModelProvider,
			ApprovalPolicy: string(cfg.ApprovalPolicy),
			SandboxMode:    string(cfg.SandboxMode),
			Cwd:            c.cwd,
			CLIVersion:     appVersion(),
		},
		ShutdownGrace: cfg.ShutdownGracePeriod,
		Logger:        log,
	})
	return c, err
}

// close releases the tools, the catalog and, last, the store.
func (c *core) close() {
	if c.tools != nil {
		c.tools.Close()
	}
	if c.cat != nil {
		c.cat.Close()
	}
	if c.st != nil {
		if err := c.st.Close(); err != nil {
			c.log.Error("closing store", "err", err)
		}
	}
}
