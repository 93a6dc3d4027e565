package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/store"
)

// How long a forwarded request may wait for its answer once the owner has
// taken it: the owner runs it at once (a steer, an interrupt, a turn's
// first write), so this only bounds an owner that hangs. A request the
// owner has not taken within LeaseTTL is withdrawn: the owner is dead or
// stalled, and its lease ends within the TTL.
const (
	forwardTimeout = 30 * time.Second
	// forwardPoll is how often a waiting sender looks at its request's
	// row, should the owner's notification be lost (a notifier that was
	// reconnecting).
	forwardPoll = 500 * time.Millisecond
)

// channel is the NOTIFY channel of a node: appserver_cmd_<node>, or a
// digest of the node id when that would pass Postgres's 63-byte limit on
// identifiers.
func channel(node string) string {
	const prefix = "appserver_cmd_"
	if len(prefix)+len(node) <= 63 {
		return prefix + node
	}
	sum := sha256.Sum256([]byte(node))
	return prefix + hex.EncodeToString(sum[:16])
}

// Forward sends a request to the node that holds the thread's lease and
// returns its answer. ok is false, and nothing is sent, when no other live
// node holds the lease: the caller handles the request itself. The
// owner's errors come back with their code and message.
func (n *Node) Forward(ctx context.Context, threadID, method string, params any) (result json.RawMessage, ok bool, err error) {
	var owner string
	err = n.pool.QueryRow(ctx, `SELECT node_id FROM thread_leases
		WHERE thread_id = $1 AND node_id <> $2 AND expires_at > clock_timestamp()`, threadID, n.cfg.NodeID).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, true, apperr.Wrap(apperr.Unavailable, err, "storage unavailable")
	}
	raw, err := json.Marshal(params)
	if err == nil {
		// A client's answer may hold NUL (a tool's output), which jsonb
		// refuses: the store's escape, undone by the owner.
		raw, err = store.EscapeNUL(raw)
	}
	if err != nil {
		return nil, true, apperr.Wrap(apperr.Internal, err, "encode forwarded request")
	}
	id, wake, err := n.send(ctx, owner, method, raw)
	if err != nil {
		return nil, true, apperr.Wrap(apperr.Unavailable, err, "forwarding to node %s", owner)
	}
	defer n.forgetWaiter(id)
	res, err := n.await(ctx, id, wake)
	return res, true, err
}

// send stores the request and notifies the owner, registering the waiter
// before the notification can be delivered (at commit).
func (n *Node) send(ctx context.Context, owner, method string, params []byte) (int64, chan struct{}, error) {
	tx, err := n.pool.Begin(ctx)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var id int64
	if err := tx.QueryRow(ctx, `INSERT INTO node_commands (node_id, reply_to, method, params)
		VALUES ($1, $2, $3, $4) RETURNING id`, owner, n.cfg.NodeID, method, string(params)).Scan(&id); err != nil {
		return 0, nil, err
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, $2)`, channel(owner), "c:"+strconv.FormatInt(id, 10)); err != nil {
		return 0, nil, err
	}
	wake := make(chan struct{}, 1)
	n.waitMu.Lock()
	n.waiters[id] = wake
	n.waitMu.Unlock()
	if err := tx.Commit(ctx); err != nil {
		n.forgetWaiter(id)
		return 0, nil, err
	}
	return id, wake, nil
}

// await waits for the owner's answer to request id, then deletes the row.
func (n *Node) await(ctx context.Context, id int64, wake <-chan struct{}) (json.RawMessage, error) {
	poll := time.NewTicker(forwardPoll)
	defer poll.Stop()
	timeout := time.NewTimer(forwardTimeout)
	defer timeout.Stop()
	untaken := time.NewTimer(n.cfg.LeaseTTL)
	defer untaken.Stop()
	for {
		var (
			state         string
			result        []byte
			code, message *string
		)
		err := n.pool.QueryRow(ctx, `SELECT state, result, error_code, error_message FROM node_commands WHERE id = $1`, id).
			Scan(&state, &result, &code, &message)
		if err != nil {
			return nil, apperr.Wrap(apperr.Unavailable, err, "forwarded request lost")
		}
		if state == "done" {
			_, _ = n.pool.Exec(context.WithoutCancel(ctx), `DELETE FROM node_commands WHERE id = $1`, id)
			if code != nil {
				return nil, apperr.New(apperr.Code(*code), "%s", deref(message))
			}
			return store.UnescapeNUL(result), nil
		}
		select {
		case <-wake:
		case <-poll.C:
		case <-untaken.C:
			if state == "pending" {
				return nil, n.abandon(id, errors.New("not taken within the lease TTL"))
			}
		case <-timeout.C:
			return nil, n.abandon(id, errors.New("timed out"))
		case <-ctx.Done():
			return nil, n.abandon(id, ctx.Err())
		}
	}
}

// abandon withdraws a request nobody answered; one the owner already took
// may still take effect.
func (n *Node) abandon(id int64, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = n.pool.Exec(ctx, `DELETE FROM node_commands WHERE id = $1`, id)
	return apperr.Wrap(apperr.Unavailable, cause, "the node running the thread did not answer")
}

func (n *Node) forgetWaiter(id int64) {
	n.waitMu.Lock()
	delete(n.waiters, id)
	n.waitMu.Unlock()
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// catchUp runs the requests addressed to this node that it may have
// missed (sent while its notifier was reconnecting, or before it ran)
// and wakes every waiting sender, whose answer may have been missed too.
// The notifier calls it after every connection; Start once it runs.
func (n *Node) catchUp() {
	ctx, ok := n.workContext()
	if !ok {
		return
	}
	rows, err := n.pool.Query(ctx, `SELECT id FROM node_commands WHERE node_id = $1 AND state = 'pending'`, n.cfg.NodeID)
	if err == nil {
		var missed []int64
		if missed, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err == nil {
			for _, id := range missed {
				n.runAsync(id)
			}
		}
	}
	if err != nil && ctx.Err() == nil {
		n.log.Warn("looking for missed forwarded requests", "err", err)
	}
	n.wakeAll()
}

// onNote handles a notification on the node's channel: "c:<id>" is a
// request to run, "r:<id>" the answer to one of this node's.
func (n *Node) onNote(payload string) {
	kind, idText, _ := strings.Cut(payload, ":")
	id, err := strconv.ParseInt(idText, 10, 64)
	if err != nil {
		return
	}
	switch kind {
	case "c":
		n.runAsync(id)
	case "r":
		n.waitMu.Lock()
		wake := n.waiters[id]
		n.waitMu.Unlock()
		if wake != nil {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	}
}

// workContext is the context of the node's work, and false before Start
// and after Stop.
func (n *Node) workContext() (context.Context, bool) {
	if !n.base.Running() {
		return nil, false
	}
	return n.runCtx, true
}

func (n *Node) wakeAll() {
	n.waitMu.Lock()
	defer n.waitMu.Unlock()
	for _, wake := range n.waiters {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// runAsync runs a forwarded request off the notifier's goroutine, so that
// a slow one does not hold the others or the answers. A node that does
// not run leaves it pending: Start runs it, or its sender withdraws it.
// Stop cancels it and waits for it (service.Base.Go).
func (n *Node) runAsync(id int64) {
	if !n.base.Running() {
		return
	}
	n.base.Go(func(ctx context.Context) { n.run(ctx, id) })
}

// run claims a request addressed to this node, once across the listener
// and the missed-request check, runs it and sends the answer back.
func (n *Node) run(ctx context.Context, id int64) {
	var method, replyTo string
	var params []byte
	err := n.pool.QueryRow(ctx, `UPDATE node_commands SET state = 'running'
		WHERE id = $1 AND node_id = $2 AND state = 'pending' RETURNING method, params, reply_to`, id, n.cfg.NodeID).
		Scan(&method, &params, &replyTo)
	if err != nil {
		if !errors.Is(err, pgx.ErrNoRows) {
			n.log.Warn("claiming a forwarded request", "id", id, "err", err)
		}
		return
	}
	res, runErr := n.events.Command(ctx, method, store.UnescapeNUL(params))
	var result, code, message any
	if runErr != nil {
		// Text cannot hold NUL.
		code, message = string(apperr.CodeOf(runErr)), strings.ReplaceAll(apperr.MessageOf(runErr), "\x00", "\uFFFD")
	} else if raw, err := json.Marshal(res); err != nil {
		code, message = string(apperr.Internal), "encode the answer"
	} else if raw, err = store.EscapeNUL(raw); err != nil {
		code, message = string(apperr.Internal), "encode the answer"
	} else {
		result = string(raw)
	}
	// The answer is stored even if the node is stopping: the sender waits.
	octx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := n.pool.Exec(octx, `UPDATE node_commands SET state = 'done', result = $2, error_code = $3, error_message = $4 WHERE id = $1`,
		id, result, code, message); err != nil {
		n.log.Warn("answering a forwarded request", "id", id, "err", err)
		return
	}
	if _, err := n.pool.Exec(octx, `SELECT pg_notify($1, $2)`, channel(replyTo), "r:"+strconv.FormatInt(id, 10)); err != nil {
		n.log.Warn("answering a forwarded request", "id", id, "err", err)
	}
}

// MethodAnswer is the forwarded request that carries a client's answer to
// a server request (an approval, user input) to the node whose turn asked
// it; its params are an Answer.
const MethodAnswer = "serverRequest/answer"

// Answer is a client's answer to a pending server request of a thread.
type Answer struct {
	ThreadID  string          `json:"threadId"`
	RequestID int64           `json:"requestId"`
	Result    json.RawMessage `json:"result"`
	// Error is the message of the client's JSON-RPC error reply, "" for a
	// result.
	Error string `json:"error,omitempty"`
}

// AnswerRequest forwards a client's answer to a server request of a
// thread to the node running the thread's turn, which settles the request
// as if its own client had answered; ok is false when no other node holds
// the thread.
func (n *Node) AnswerRequest(ctx context.Context, a Answer) (ok bool, err error) {
	_, ok, err = n.Forward(ctx, a.ThreadID, MethodAnswer, a)
	return ok, err
}

// MethodHeld is the forwarded request that tells the node whose turn asked
// a server request whether a client of the sender holds it; its params are
// a RequestRef with Node and Held.
const MethodHeld = "serverRequest/held"

// RequestRef names a pending server request of a thread on the node
// running the thread's turn.
type RequestRef struct {
	ThreadID  string `json:"threadId"`
	RequestID int64  `json:"requestId"`
	// Node and Held, in a MethodHeld request: whether a client of node
	// Node holds the request.
	Node string `json:"node,omitempty"`
	Held bool   `json:"held,omitempty"`
}

// RequestHeld tells the node running the thread's turn whether a client of
// this node holds its server request, so that it waits for the answer
// while one does; ok is false when no other node holds the thread.
func (n *Node) RequestHeld(ctx context.Context, threadID string, requestID int64, held bool) (ok bool, err error) {
	_, ok, err = n.Forward(ctx, threadID, MethodHeld, RequestRef{ThreadID: threadID, RequestID: requestID, Node: n.cfg.NodeID, Held: held})
	return ok, err
}

// MethodPending is the forwarded request that asks the node running a
// thread's turn for its pending server requests; its params are a
// RequestRef with only the thread.
const MethodPending = "serverRequest/pending"

// PendingRequests returns the node running the thread's turn's answer to
// MethodPending (its pending server requests, encoded); ok is false when
// no other node holds the thread.
func (n *Node) PendingRequests(ctx context.Context, threadID string) (result json.RawMessage, ok bool, err error) {
	return n.Forward(ctx, threadID, MethodPending, RequestRef{ThreadID: threadID})
}
