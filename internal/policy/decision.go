package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// ReviewKind is the kind of a client's answer to an approval request.
type ReviewKind int

// The review decision kinds (docs/tools.md §4.3 table).
const (
	// Accept runs once ("accept").
	Accept ReviewKind = iota
	// AcceptForSession runs and remembers the approval for the thread
	// ("acceptForSession": the same command, or the same patch files).
	AcceptForSession
	// AcceptWithExecpolicyAmendment runs and adds an allow rule for a prefix
	// ({"acceptWithExecpolicyAmendment":{"execpolicy_amendment":[...]}}).
	AcceptWithExecpolicyAmendment
	// ApplyNetworkPolicyAmendment adds a host allow/deny rule
	// ({"applyNetworkPolicyAmendment":{"network_policy_amendment":{...}}}).
	ApplyNetworkPolicyAmendment
	// Decline does not run; the turn continues ("decline").
	Decline
	// Cancel does not run and interrupts the turn ("cancel").
	Cancel
)

// NetworkAmendment is a host rule proposed with or chosen in a network
// approval.
type NetworkAmendment struct {
	// Host is the host name.
	Host string `json:"host"`
	// Action is "allow" or "deny".
	Action string `json:"action"`
}

// ReviewDecision is a client's answer to an approval request, in the
// app-server v2 wire shape.
type ReviewDecision struct {
	// Kind selects the decision.
	Kind ReviewKind
	// ExecpolicyAmendment is the prefix of AcceptWithExecpolicyAmendment.
	ExecpolicyAmendment []string
	// NetworkAmendment is the rule of ApplyNetworkPolicyAmendment.
	NetworkAmendment *NetworkAmendment
}

// The wire names of the decisions.
const (
	wireAccept              = "accept"
	wireAcceptForSession    = "acceptForSession"
	wireDecline             = "decline"
	wireCancel              = "cancel"
	wireAcceptWithAmendment = "acceptWithExecpolicyAmendment"
	wireApplyNetwork        = "applyNetworkPolicyAmendment"
)

// String returns the decision's wire name.
func (d ReviewDecision) String() string {
	switch d.Kind {
	case AcceptForSession:
		return wireAcceptForSession
	case AcceptWithExecpolicyAmendment:
		return wireAcceptWithAmendment
	case ApplyNetworkPolicyAmendment:
		return wireApplyNetwork
	case Decline:
		return wireDecline
	case Cancel:
		return wireCancel
	default:
		return wireAccept
	}
}

// MarshalJSON writes the string form or the one-key object form.
func (d ReviewDecision) MarshalJSON() ([]byte, error) {
	switch d.Kind {
	case AcceptWithExecpolicyAmendment:
		prefix := d.ExecpolicyAmendment
		if prefix == nil {
			prefix = []string{}
		}
		return json.Marshal(map[string]any{wireAcceptWithAmendment: map[string]any{"execpolicy_amendment": prefix}})
	case ApplyNetworkPolicyAmendment:
		var a NetworkAmendment
		if d.NetworkAmendment != nil {
			a = *d.NetworkAmendment
		}
		return json.Marshal(map[string]any{wireApplyNetwork: map[string]any{"network_policy_amendment": a}})
	}
	return json.Marshal(d.String())
}

// UnmarshalJSON reads the string or object form; unknown decisions are errors.
func (d *ReviewDecision) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch s {
		case wireAccept:
			*d = ReviewDecision{Kind: Accept}
		case wireAcceptForSession:
			*d = ReviewDecision{Kind: AcceptForSession}
		case wireDecline:
			*d = ReviewDecision{Kind: Decline}
		case wireCancel:
			*d = ReviewDecision{Kind: Cancel}
		default:
			return fmt.Errorf("unknown variant `%s`", s)
		}
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("decision: %w", err)
	}
	if len(obj) != 1 {
		return fmt.Errorf("decision: expected exactly one key, got %d", len(obj))
	}
	for k, v := range obj {
		switch k {
		case wireAcceptWithAmendment:
			var w struct {
				Prefix *[]string `json:"execpolicy_amendment"`
			}
			if err := json.Unmarshal(v, &w); err != nil {
				return err
			}
			if w.Prefix == nil {
				return fmt.Errorf("missing field `execpolicy_amendment`")
			}
			*d = ReviewDecision{Kind: AcceptWithExecpolicyAmendment, ExecpolicyAmendment: *w.Prefix}
		case wireApplyNetwork:
			var w struct {
				Amendment *NetworkAmendment `json:"network_policy_amendment"`
			}
			if err := json.Unmarshal(v, &w); err != nil {
				return err
			}
			if w.Amendment == nil {
				return fmt.Errorf("missing field `network_policy_amendment`")
			}
			if w.Amendment.Action != "allow" && w.Amendment.Action != "deny" {
				return fmt.Errorf("unknown variant `%s`, expected `allow` or `deny`", w.Amendment.Action)
			}
			*d = ReviewDecision{Kind: ApplyNetworkPolicyAmendment, NetworkAmendment: w.Amendment}
		default:
			return fmt.Errorf("unknown variant `%s`", k)
		}
	}
	return nil
}

// Approved reports whether the decision lets the call run: any accept form,
// or a network amendment that allows.
func (d ReviewDecision) Approved() bool {
	switch d.Kind {
	case Accept, AcceptForSession, AcceptWithExecpolicyAmendment:
		return true
	case ApplyNetworkPolicyAmendment:
		return d.NetworkAmendment != nil && d.NetworkAmendment.Action == "allow"
	}
	return false
}

// DefaultAvailableDecisions is the ordered choice list Codex offers for a
// command approval: with a network context, accept, acceptForSession, the
// first allowing network amendment, cancel; with additional permissions,
// accept and cancel; otherwise accept, the proposed exec-policy amendment
// when there is one, and cancel. Clients may still answer with any decision
// of the schema.
func DefaultAvailableDecisions(networkContext bool, amendment []string, networkAmendments []NetworkAmendment, additionalPermissions bool) []ReviewDecision {
	if networkContext {
		out := []ReviewDecision{{Kind: Accept}, {Kind: AcceptForSession}}
		for _, a := range networkAmendments {
			if a.Action == "allow" {
				a := a
				out = append(out, ReviewDecision{Kind: ApplyNetworkPolicyAmendment, NetworkAmendment: &a})
				break
			}
		}
		return append(out, ReviewDecision{Kind: Cancel})
	}
	if additionalPermissions {
		return []ReviewDecision{{Kind: Accept}, {Kind: Cancel}}
	}
	out := []ReviewDecision{{Kind: Accept}}
	if len(amendment) > 0 {
		out = append(out, ReviewDecision{Kind: AcceptWithExecpolicyAmendment, ExecpolicyAmendment: slices.Clone(amendment)})
	}
	return append(out, ReviewDecision{Kind: Cancel})
}

// PatchAvailableDecisions is the choice list of a file-change approval.
func PatchAvailableDecisions() []ReviewDecision {
	return []ReviewDecision{{Kind: Accept}, {Kind: AcceptForSession}, {Kind: Decline}, {Kind: Cancel}}
}
