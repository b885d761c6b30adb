//go:build !unix

package upstream

import "net"

// closedByPeer can't look into a connection here: an idle connection is
// taken as open, and a send on one the server did close is sent again
// (h1.send).
func closedByPeer(net.Conn) bool { return false }
