"""Model access: settings, the fleet-wide limiter, the litellm client."""
