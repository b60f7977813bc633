package wire

import "github.com/botharness/outbox/adapters/handlers/admin"

// wireConsole adds the admin routes the web console uses (whoami, retry risk).
func wireConsole(a *App) {
	for k, f := range admin.ConsoleRoutes(a.Resolver) {
		a.AdminExtra[k] = f
	}
}
