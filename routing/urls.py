from django.urls import path

from routing import views

app_name = "routing"

urlpatterns = [
    path("inbox/", views.inbox, name="inbox"),
    path("mine/", views.my_questions, name="mine"),
    path("q/<int:question_id>/", views.question_detail, name="question"),
    path("q/<int:question_id>/publish/", views.question_publish, name="publish"),
    path("q/<int:question_id>/close/", views.question_close, name="close"),
    path("report/<str:slug>/", views.report, name="report"),
    path("report/<str:slug>/csv/", views.report_csv, name="report_csv"),
    path("escalate/<int:message_id>/", views.escalate, name="escalate"),
]
