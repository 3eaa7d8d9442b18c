"""The app's date and time formats (settings.FORMAT_MODULE_PATH): one way of writing them everywhere."""
