//go:build !unix

package upstream

// peer is what closedByPeer keeps of a connection: nothing here.
type peer struct{}

// closedByPeer can't look into a connection here: an idle connection is
// taken as open, and a send on one the server did close is sent again
// (h1.send).
func closedByPeer(*h1Conn) bool { return false }
