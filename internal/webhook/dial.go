package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// sharedAddressSpace is 100.64.0.0/10 (carrier-grade NAT), private in
// effect though not in netip's IsPrivate.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// errRefusedAddress is the error of a dial refused by the address rule.
var errRefusedAddress = errors.New("webhook receiver refused")

// refusedAddress reports whether a receiver at ip is refused unless the
// entry allows private addresses: loopback, private, link-local,
// unspecified, multicast and shared (CGNAT) addresses, and IPv4 ones
// written as IPv6.
func refusedAddress(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() ||
		sharedAddressSpace.Contains(ip) || (ip.Is4() && ip.As4()[0] == 0)
}

// checkDialled is a net.Dialer's Control hook: it refuses a connection to
// an address of refusedAddress. It sees the address actually dialled, after
// name resolution, so a name that resolves (or re-resolves) to a private
// address is refused too.
func checkDialled(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%w: %v", errRefusedAddress, err)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: address %q is not an IP", errRefusedAddress, host)
	}
	if refusedAddress(ip) {
		return fmt.Errorf("%w: %s is a loopback, private, link-local or unspecified address (allow_private is off)", errRefusedAddress, ip)
	}
	return nil
}

// newClient returns the HTTP client of one entry: no proxy (it would hide
// the receiver's address from the check), no redirects followed (a
// redirect is an answer that is not a success), each dial checked unless
// allowPrivate.
func newClient(allowPrivate bool, timeout time.Duration) *http.Client {
	dialer := &net.Dialer{Timeout: timeout}
	if !allowPrivate {
		dialer.Control = checkDialled
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy: nil,
			DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return dialer.DialContext(ctx, network, addr)
			},
			ForceAttemptHTTP2:     true,
			MaxIdleConnsPerHost:   2,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   timeout,
			ResponseHeaderTimeout: timeout,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}
