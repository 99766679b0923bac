package agentdir

import (
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ParseNetworkAllow checks one entry of a network allow-list and returns it
// in its canonical form, "host:port" with the host in lower case and an
// IPv6 address in brackets. An entry is a host name or an IP address and a
// port from 1 to 65535: "api.example.com:443", "127.0.0.1:8080",
// "[::1]:8443". Wildcards, schemes, paths and a missing port are refused.
func ParseNetworkAllow(entry string) (string, error) {
	if strings.Contains(entry, "://") || strings.ContainsAny(entry, "/?#@ \t") {
		return "", fmt.Errorf("%q is not host:port (write the host and port only, e.g. api.example.com:443)", entry)
	}
	host, port, err := net.SplitHostPort(entry)
	if err != nil {
		return "", fmt.Errorf("%q is not host:port (e.g. api.example.com:443, 127.0.0.1:8080, [::1]:8443): %v", entry, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
		return "", fmt.Errorf("%q: the port must be a number from 1 to 65535", entry)
	}
	if host == "" {
		return "", fmt.Errorf("%q has no host", entry)
	}
	if ip := net.ParseIP(host); ip != nil {
		if strings.HasPrefix(entry, "[") != (ip.To4() == nil) {
			return "", fmt.Errorf("%q: write an IPv6 address in brackets ([::1]:443) and an IPv4 address without them", entry)
		}
		return net.JoinHostPort(ip.String(), port), nil
	}
	if strings.HasPrefix(entry, "[") {
		return "", fmt.Errorf("%q: only an IPv6 address goes in brackets", entry)
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if strings.Contains(host, "*") {
		return "", fmt.Errorf("%q: wildcards are not supported; list each host", entry)
	}
	if len(host) > 253 {
		return "", fmt.Errorf("%q: the host name is longer than 253 characters", entry)
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || strings.HasPrefix(label, "-") || strings.HasSuffix(label, "-") {
			return "", fmt.Errorf("%q: %q is not a valid host name", entry, host)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return "", fmt.Errorf("%q: %q is not a valid host name", entry, host)
			}
		}
	}
	return net.JoinHostPort(host, port), nil
}
