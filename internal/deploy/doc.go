// Package deploy holds the tests of what deploy/ ships besides the image
// (internal/image) and the Helm chart: the compose file, the systemd unit
// and the example server.properties. None of them can run here (no
// container engine, no systemd as init), so the tests check that they are
// consistent with each other and with the broker's configuration parser.
package deploy
